package crds_test

import (
	"testing"

	"github.com/configbutler/gitops-reverser/crds"
)

func TestOverlayFolderStaysInsideBaseFolder(t *testing.T) {
	cases := []struct{ base, kustomization, want string }{
		{"apps/production", "", "apps/production"},
		{"apps", "production", "apps/production"},
		{"/apps/", "production/", "apps/production"},
		{"", "apps/production", "apps/production"},
		{"apps", "../clusters", "apps"},
		{"", "../x", ""},
	}
	for _, c := range cases {
		d := &crds.GitDestination{Spec: crds.GitDestinationSpec{BaseFolder: c.base, Layout: crds.LayoutExisting}}
		if c.kustomization != "" {
			d.Spec.Existing = &crds.ExistingLayout{Kustomization: c.kustomization}
		}
		if got := d.OverlayFolder(); got != c.want {
			t.Errorf("baseFolder %q, kustomization %q: %q, want %q", c.base, c.kustomization, got, c.want)
		}
	}
}
