package daemon

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/configbutler/gitops-reverser/testenv"
)

// Where the daemon's resident set goes, for make bench: its own memory (heap, stacks, the
// runtime's) apart from the pages of its binary, sampled through a run so that the peak is
// split as it stood, and the binary's pages split into code and read-only data (types, strings,
// the tables the runtime walks to scan stacks and grow them).

// residentPeak is the largest resident set seen, as it stood then.
type residentPeak struct{ anon, file float64 }

// sampleResident samples the daemon's resident set every 20 ms until the returned function is
// called, which returns the largest seen.
func sampleResident(b testing.TB, pid int) func() residentPeak {
	var (
		mu   sync.Mutex
		peak residentPeak
		done = make(chan struct{})
		wg   sync.WaitGroup
	)
	wg.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			anon, file, err := resident(pid)
			if err != nil {
				return // the daemon ended: the peak stands
			}
			mu.Lock()
			if anon+file > peak.anon+peak.file {
				peak = residentPeak{anon, file}
			}
			mu.Unlock()
		}
	})
	return func() residentPeak {
		close(done)
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
}

// resident reads RssAnon and RssFile (MiB) from /proc.
func resident(pid int) (anonMiB, fileMiB float64, err error) {
	status, err := procStatusMiB(pid)
	return status["RssAnon"], status["RssFile"], err
}

// procStatusMiB reads the sizes of /proc/pid/status (the lines in kB), in MiB by name.
func procStatusMiB(pid int) (map[string]float64, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	sizes := map[string]float64{}
	for _, line := range strings.Split(string(status), "\n") {
		key, v, _ := strings.Cut(line, ":")
		if kb, ok := strings.CutSuffix(strings.TrimSpace(v), " kB"); ok {
			n, _ := strconv.ParseFloat(kb, 64)
			sizes[key] = n / 1024
		}
	}
	return sizes, nil
}

// binaryPages is how much of the binary's code and read-only data is resident, of how much.
type binaryPages struct{ code, codeSize, data, dataSize float64 }

// residentBinary reads the daemon binary's mappings from /proc/pid/smaps.
func residentBinary(b testing.TB, pid int, binary string) binaryPages {
	smaps, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		b.Fatal(err)
	}
	var pages binaryPages
	var size, rss *float64
	for _, line := range strings.Split(string(smaps), "\n") {
		fields := strings.Fields(line)
		switch {
		case len(fields) >= 6 && strings.Contains(fields[0], "-"): // a mapping's first line
			size, rss = nil, nil
			if fields[5] == binary && fields[1] == "r-xp" {
				size, rss = &pages.codeSize, &pages.code
			} else if fields[5] == binary && fields[1] == "r--p" {
				size, rss = &pages.dataSize, &pages.data
			}
		case len(fields) == 3 && size != nil && (fields[0] == "Size:" || fields[0] == "Rss:"):
			kb, _ := strconv.ParseFloat(fields[1], 64)
			if fields[0] == "Size:" {
				*size += kb / 1024
			} else {
				*rss += kb / 1024
			}
		}
	}
	return pages
}

// reportResident prints where the resident set of d went: the peak, and at the end the heap in
// use and the binary's pages.
func reportResident(b testing.TB, d *testenv.Daemon, peak residentPeak) {
	pages := residentBinary(b, d.Pid(), daemonBin)
	heap := d.Metric(b, "go_memstats_heap_inuse_bytes") / (1 << 20)
	report("at the peak: %.0f MiB of memory (heap, stacks, the runtime's), %.0f MiB of the binary's pages", peak.anon, peak.file)
	report("at the end: heap in use %.1f MiB; binary's code %.1f of %.1f MiB resident, its read-only data (types, strings, the runtime's function tables) %.1f of %.1f MiB",
		heap, pages.code, pages.codeSize, pages.data, pages.dataSize)
}
