package placement

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestResolvingFilesAreTheFoldersAbove: the kustomizations and charts of the file's folder and
// of each one above it, within the indexed folder, and nothing for a file outside it.
func TestResolvingFilesAreTheFoldersAbove(t *testing.T) {
	got := ResolvingFiles("apps", "apps/podinfo/podinfo.yaml")
	want := []string{
		"apps/podinfo/kustomization.yaml", "apps/podinfo/kustomization.yml", "apps/podinfo/Kustomization", "apps/podinfo/Chart.yaml",
		"apps/kustomization.yaml", "apps/kustomization.yml", "apps/Kustomization", "apps/Chart.yaml",
	}
	if !slices.Equal(got, want) {
		t.Errorf("ResolvingFiles = %q, want %q", got, want)
	}
	if got := ResolvingFiles("", "web.yaml"); !slices.Equal(got, []string{"kustomization.yaml", "kustomization.yml", "Kustomization", "Chart.yaml"}) {
		t.Errorf("at the root: %q", got)
	}
	if got := ResolvingFiles("apps", "other/web.yaml"); got != nil {
		t.Errorf("outside the folder: %q", got)
	}
}

// TestFileDocumentsResolveOneFile: a file read with the kustomizations above it has its
// documents' namespaces inherited from the nearest one that sets one, its broken documents
// reported at their line in the file, and a file a kustomization names as a patch no documents.
func TestFileDocumentsResolveOneFile(t *testing.T) {
	file := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n  namespace: own\n---\nkind: [\n"
	files := map[string][]byte{
		"apps/web/web.yaml":           []byte(file),
		"apps/web/kustomization.yaml": []byte("resources: [web.yaml]\n"),
		"apps/kustomization.yaml":     []byte("namespace: team\nresources: [web]\n"),
	}
	docs, problems := FileDocuments("apps", "apps/web/web.yaml", files)
	var got []string
	for _, d := range docs {
		got = append(got, fmt.Sprintf("%d %s %v", d.Doc, d.Key, d.Inherited))
	}
	if want := []string{"0 ConfigMap team/a true", "1 ConfigMap own/b false"}; !slices.Equal(got, want) {
		t.Errorf("documents %q, want %q", got, want)
	}
	if len(problems) != 1 || problems[0].Doc != 2 || !strings.Contains(problems[0].Err.Error(), "line 12") {
		t.Errorf("problems %v, want document 3 at line 12", problems)
	}
	if line := DocumentLine([]byte(file), 1); line != 6 {
		t.Errorf("DocumentLine(1) = %d, want 6", line)
	}
	files["apps/web/kustomization.yaml"] = []byte("patches:\n- path: web.yaml\n")
	if docs, _ := FileDocuments("apps", "apps/web/web.yaml", files); len(docs) != 0 {
		t.Errorf("a patch file has documents %v", docs)
	}
}
