package daemon

import (
	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
		byModule := map[string]int64{}
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			f := strings.Fields(sc.Text()) // address size type name
			if len(f) < 4 {
				continue
			}
			name := f[3]
			n, _ := strconv.ParseInt(f[1], 10, 64)
			if strings.HasPrefix(name, "filippo.io/age") || strings.HasPrefix(name, "github.com/configbutler/gitops-reverser/sops.") {
				encryption += n
			}
			if strings.ContainsAny(f[2], "TtRr") { // code and read-only data: what the file holds, not zeroed data
				byModule[moduleOf(name)] += n
			}
		}
		fmt.Printf("binary: stripped daemon %.2f MiB, of which SOPS + age code %.0f KiB (without it about %.2f MiB)\n",
			float64(st.Size())/(1<<20), float64(encryption)/1024, float64(st.Size()-encryption)/(1<<20))
		modules := slices.Collect(maps.Keys(byModule))
		slices.SortFunc(modules, func(a, b string) int { return cmp.Compare(byModule[b], byModule[a]) })
		var top []string
		for _, m := range modules[:min(15, len(modules))] {
			top = append(top, fmt.Sprintf("%s %.0f KiB", m, float64(byModule[m])/1024))
		}
		fmt.Printf("binary: what each dependency costs, by the size of its code and read-only data (the tables Go keeps per function come on top): %s\n",
			strings.Join(top, ", "))
	}
}

// moduleOf is the module (or "std", or "runtime data" for the linker's own symbols) a symbol
// belongs to, by its package path: the first three elements of a path on a code host, two of
// one on another domain (k8s.io/api), one of the standard library.
func moduleOf(symbol string) string {
	pkg := symbol
	if i := strings.LastIndex(pkg, "/"); i >= 0 {
		if j := strings.Index(pkg[i:], "."); j >= 0 {
			pkg = pkg[:i+j]
		}
	} else if j := strings.Index(pkg, "."); j >= 0 {
		pkg = pkg[:j]
	}
	parts := strings.Split(pkg, "/")
	switch {
	case !strings.Contains(parts[0], "."):
		if strings.HasPrefix(symbol, "go:") || strings.HasPrefix(symbol, "type:") || strings.HasPrefix(symbol, "runtime.") {
			return "runtime and type data"
		}
		return "std"
	case parts[0] == "github.com" || parts[0] == "gitlab.com" || parts[0] == "golang.org" || parts[0] == "go.yaml.in" || parts[0] == "code.gitea.io":
		return strings.Join(parts[:min(3, len(parts))], "/")
	}
	return strings.Join(parts[:min(2, len(parts))], "/")
}
