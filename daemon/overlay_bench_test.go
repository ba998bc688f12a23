package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/placement"
	"github.com/configbutler/gitops-reverser/testenv"
)

// Issue 60's figures of an overlay: a base of 100 apps (a Deployment and a Service each, 200
// objects) and a production overlay over it that pins some apps' images (images:), applied by
// Flux (kustomize-controller's server-side apply). The daemon is started as a newcomer starts
// it (a local run, its own namespace absent, write-back off), its destination pointing at the
// overlay; a person's kubectl set image lands in the overlay's images: entry of that app.
//
// Two overlays: one that pins three apps, as the overlays of flux2-kustomize-helm-example pin a
// few, and one that pins every app. kustomize runs one image transformer over every object for
// each images: entry, so the second one's render, the check every commit waits for, costs about
// ten times the first's, in the daemon as in Flux's kustomize-controller.
const (
	overlayApps    = 100
	overlayLagRuns = 10
)

var services = schema.GroupVersionResource{Version: "v1", Resource: "services"}

// overlayBenchRepo is the team's repository: apps/base with the apps, apps/production over it,
// which pins the images of the first pinned apps.
func overlayBenchRepo(ns string, pinned int) map[string]string {
	files := map[string]string{}
	var base, images strings.Builder
	base.WriteString("resources:\n")
	for i := range overlayApps {
		name := fmt.Sprintf("app-%03d", i)
		fmt.Fprintf(&base, "  - %s.yaml\n", name)
		if i < pinned {
			images.WriteString(overlayEntry(i, "1.0.1"))
		}
		files["apps/base/"+name+".yaml"] = fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
spec:
  replicas: 1
  selector:
    matchLabels: {app: %[1]s}
  template:
    metadata:
      labels: {app: %[1]s}
    spec:
      containers:
        - name: web
          image: ghcr.io/example/%[1]s:1.0.0
          ports: [{containerPort: 8080, name: http}]
---
apiVersion: v1
kind: Service
metadata:
  name: %[1]s
spec:
  selector: {app: %[1]s}
  ports: [{port: 80, targetPort: http}]
`, name)
	}
	files["apps/base/kustomization.yaml"] = base.String()
	files["apps/production/kustomization.yaml"] = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: " + ns +
		"\nresources:\n  - ../base\nlabels:\n  - pairs: {env: production}\nimages:\n" + images.String()
	return files
}

// overlayEntry is the images: entry of app i pinned to tag, as the overlay writes it.
func overlayEntry(i int, tag string) string {
	return fmt.Sprintf("  - name: ghcr.io/example/app-%03d\n    newTag: %s\n", i, tag)
}

// BenchmarkOverlay200 prints the lag of a person's change to an object of an overlay of 200
// objects (kubectl set image → the overlay's images: entry on the remote) and the daemon's CPU
// per such commit, which places the change and renders the overlay again to check it, for an
// overlay that pins three apps' images and for one that pins all 100.
func BenchmarkOverlay200(b *testing.B) {
	planes.Lend(b)
	for range b.N {
		overlayFigures(b, 3)
		overlayFigures(b, overlayApps)
	}
}

// overlayFigures runs the daemon on an overlay that pins the images of pinned apps and prints
// its figures; every change sets the image of a pinned app.
func overlayFigures(b *testing.B, pinned int) {
	ns := fmt.Sprintf("bench-overlay-%d", time.Now().UnixNano())
	files := overlayBenchRepo(ns, pinned)
	srv, dyn := teamRepository(b, ns, files, crds.GitDestinationSpec{BaseFolder: "apps", Layout: crds.LayoutExisting,
		Existing: &crds.ExistingLayout{Kustomization: "production"}}, "deployments", "services")
	applyRender(b, dyn, files, "apps/production")
	landed := func(i int, tag string) time.Time {
		return overlayLanded(b, srv, overlayEntry(i, tag))
	}

	start := time.Now()
	d := startDaemon(b, b.TempDir(), "--namespace", fmt.Sprintf("bench-home-%d", time.Now().UnixNano()))
	setImage(b, dyn, ns, pinned-1, "1.0.2")
	seed := landed(pinned-1, "1.0.2").Sub(start)
	_, cpuBefore := usage(b, d.Pid())
	commitsBefore := len(mustLog(b, srv))
	var lags []time.Duration
	for r := range overlayLagRuns {
		time.Sleep(2 * time.Second) // a quiet spell longer than the 1.5 s quiet period
		i, tag := (r*37+11)%pinned, fmt.Sprintf("1.1.%d", r)
		at := time.Now()
		setImage(b, dyn, ns, i, tag)
		lags = append(lags, landed(i, tag).Sub(at))
	}
	peak, cpuAfter := usage(b, d.Pid())
	commits := len(mustLog(b, srv)) - commitsBefore
	d.Stop(b)
	slices.Sort(lags)
	ms := func(i int) float64 { return float64(lags[i].Milliseconds()) }
	report("overlay of %d objects (%d apps in a base; production's images: pins %d of them; Flux-applied), the destination on the overlay, newcomer start", 2*overlayApps, overlayApps, pinned)
	report("  seed: daemon start → a kubectl set image made right after start in the overlay's images: on the remote: %.2f s", seed.Seconds())
	report("  one change (kubectl set image) after a 2 s quiet spell → the overlay's images: entry on the remote, min/median/max of %d: %.0f/%.0f/%.0f ms (goal: at most 500 ms)",
		len(lags), ms(0), ms(len(lags)/2), ms(len(lags)-1))
	report("  daemon CPU per commit of one change (placing it, rendering the overlay to check it, committing, pushing): %.0f ms (%d commits); peak RSS %.0f MiB",
		(cpuAfter-cpuBefore)*1000/float64(max(commits, 1)), commits, peak)
}

// applyRender applies the render of the kustomization in dir of files (Deployments and
// Services) as Flux's kustomize-controller does.
func applyRender(b testing.TB, dyn dynamic.Interface, files map[string]string, dir string) {
	b.Helper()
	data := map[string][]byte{}
	for p, s := range files {
		data[p] = []byte(s)
	}
	objects, err := placement.Build(data, dir)
	if err != nil {
		b.Fatal(err)
	}
	force := true
	for k, obj := range objects {
		gvr := services
		if k.Kind == "Deployment" {
			gvr = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
		}
		body, err := json.Marshal(obj)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := dyn.Resource(gvr).Namespace(k.Namespace).Patch(context.Background(), k.Name, types.ApplyPatchType, body,
			metav1.PatchOptions{FieldManager: "kustomize-controller", Force: &force}); err != nil {
			b.Fatal(err)
		}
	}
}

// setImage sets app i's image tag as kubectl set image does.
func setImage(b *testing.B, dyn dynamic.Interface, ns string, i int, tag string) {
	patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"ghcr.io/example/app-%03d:%s"}]}}}}`, i, tag)
	if _, err := dyn.Resource(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}).Namespace(ns).Patch(context.Background(),
		fmt.Sprintf("app-%03d", i), types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "kubectl-set"}); err != nil {
		b.Fatal(err)
	}
}

// overlayLanded watches the branch's tip until production's kustomization holds entry, and
// returns when that tip was first seen.
func overlayLanded(b *testing.B, srv *testenv.GitServer, entry string) time.Time {
	end := time.Now().Add(time.Minute)
	last := ""
	for time.Now().Before(end) {
		sha, err := srv.BranchTip(teamRepo, "main")
		if err != nil || sha == "" || sha == last {
			time.Sleep(tipPoll)
			continue
		}
		seen := time.Now()
		last = sha
		if got, err := srv.ReadFile(teamRepo, "main", "apps/production/kustomization.yaml"); err == nil && strings.Contains(string(got), entry) {
			return seen
		}
	}
	b.Fatalf("the overlay's images: did not get %q within a minute", entry)
	return time.Time{}
}

func mustLog(b *testing.B, srv *testenv.GitServer) []testenv.Commit {
	log, err := srv.Log(teamRepo, "main")
	if err != nil {
		b.Fatal(err)
	}
	return log
}
