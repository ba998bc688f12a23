package daemon

import (
	"os"
	"path/filepath"
	"testing"
)

// outsideCluster makes the test run as a local process of a user whose cache directory is a
// fresh temporary one, and returns that directory.
func outsideCluster(t *testing.T) string {
	t.Helper()
	for _, env := range []string{"KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"} {
		t.Setenv(env, "") // restores the variable after the test
		if err := os.Unsetenv(env); err != nil {
			t.Fatal(err)
		}
	}
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	return cache
}

func TestWorkDirDefaultsToTheUserCacheOutsideAndVarCacheInACluster(t *testing.T) {
	t.Run("outside a cluster", func(t *testing.T) {
		cache := outsideCluster(t)
		cfg, err := parse(t)
		if err != nil {
			t.Fatal(err)
		}
		if want := filepath.Join(cache, "gitops-reverser"); cfg.WorkDir != want || cfg.InCluster {
			t.Fatalf("work dir %q (in cluster %v), want %q outside a cluster", cfg.WorkDir, cfg.InCluster, want)
		}
	})
	t.Run("in a cluster", func(t *testing.T) {
		outsideCluster(t)
		t.Setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
		t.Setenv("KUBERNETES_SERVICE_PORT", "443")
		cfg, err := parse(t)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.WorkDir != "/var/cache/gitops-reverser" || !cfg.InCluster {
			t.Fatalf("work dir %q (in cluster %v), want /var/cache/gitops-reverser in a cluster", cfg.WorkDir, cfg.InCluster)
		}
	})
	t.Run("an explicit work dir wins", func(t *testing.T) {
		outsideCluster(t)
		cfg, err := parse(t, "--work-dir", "/srv/clones")
		if err != nil {
			t.Fatal(err)
		}
		if cfg.WorkDir != "/srv/clones" {
			t.Fatalf("work dir %q, want /srv/clones", cfg.WorkDir)
		}
	})
}
