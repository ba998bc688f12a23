package daemon

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// BenchmarkBinarySize prints the stripped daemon's size and how much of it the SOPS + age
// encryption code takes (the sops package and filippo.io/age, by their symbols), so the size
// without encrypted Secrets is the difference.
func BenchmarkBinarySize(b *testing.B) {
	planes.Lend(b)
	for range b.N {
		bin := filepath.Join(b.TempDir(), "gitops-reverser")
		if out, err := exec.Command("go", "build", "-ldflags=-s -w", "-o", bin, "..").CombinedOutput(); err != nil {
			b.Fatalf("build: %v\n%s", err, out)
		}
		st, err := os.Stat(bin)
		if err != nil {
			b.Fatal(err)
		}
		// Symbols are stripped from bin: read their sizes from an unstripped build.
		full := filepath.Join(b.TempDir(), "gitops-reverser-syms")
		if out, err := exec.Command("go", "build", "-o", full, "..").CombinedOutput(); err != nil {
			b.Fatalf("build: %v\n%s", err, out)
		}
		out, err := exec.Command("go", "tool", "nm", "-size", full).Output()
		if err != nil {
			b.Fatal(err)
		}
		var encryption int64
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			f := strings.Fields(sc.Text()) // address size type name
			if len(f) < 4 {
				continue
			}
			name := f[3]
			if strings.HasPrefix(name, "filippo.io/age") || strings.HasPrefix(name, "github.com/configbutler/gitops-reverser/sops.") {
				n, _ := strconv.ParseInt(f[1], 10, 64)
				encryption += n
			}
		}
		fmt.Printf("binary: stripped daemon %.2f MiB, of which SOPS + age code %.0f KiB (without it about %.2f MiB)\n",
			float64(st.Size())/(1<<20), float64(encryption)/1024, float64(st.Size()-encryption)/(1<<20))
	}
}
