package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// The build the tests share: compiling two platforms' daemons takes a while the first time (Go
// caches the packages afterwards), so a test binary builds once and every test reads the result.
var shared struct {
	dir  string // removed when the tests end
	once sync.Once
	res  *result
	err  error
}

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "image-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	shared.dir = dir
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			return 1
		}
	}
	return code
}

// testOptions are the options of a test build into out: a fixed version, revision and time.
func testOptions(out string) options {
	return options{
		Dir:        filepath.Join("..", ".."),
		Out:        out,
		Repository: defaultRepository,
		Version:    "1.2.3-test",
		Revision:   "0123456789abcdef0123456789abcdef01234567",
		Source:     defaultSource,
		Created:    time.Unix(1700000000, 0).UTC(),
		Platforms:  defaultPlatforms,
	}
}

// sharedBuild is the image the tests share, built on first use.
func sharedBuild(t testing.TB) *result {
	t.Helper()
	shared.once.Do(func() {
		shared.res, shared.err = build(context.Background(), testOptions(filepath.Join(shared.dir, "image")))
	})
	if shared.err != nil {
		t.Fatalf("build the image: %v", shared.err)
	}
	return shared.res
}
