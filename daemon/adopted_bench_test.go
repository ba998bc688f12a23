package daemon

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/testenv"
)

// Issue 59's figures of an adopted folder (layout Existing, DESIGN.md §11) beside those of the
// daemon's own canonical folder, for the same 2,000 ConfigMaps: a team keeps them in 200 files
// of 10 documents, in 10 kustomize folders, and Flux applies them (field manager
// kustomize-controller, server-side apply). Each layout gets a daemon started as a newcomer
// starts it, a remote of its own and a namespace of its own holding the same objects.

const (
	adoptedObjects  = 2000
	adoptedPerFile  = 10
	adoptedPerTeam  = 20 // files a kustomize folder
	adoptedLagRuns  = 10
	adoptedDeadline = 5 * time.Minute
	teamRepo        = "team"
)

// adoptedName is the name of object i; adoptedFile the file of the team's folder that holds it.
func adoptedName(i int) string { return fmt.Sprintf("cm-%05d", i) }

func adoptedFile(i int) string {
	file := i / adoptedPerFile
	return fmt.Sprintf("apps/team-%02d/config-%02d.yaml", file/adoptedPerTeam, file%adoptedPerTeam)
}

// adoptedPayload is object i's ~1 KiB value at round (a plain scalar: no space at its end).
func adoptedPayload(i, round int) string {
	return strings.TrimSpace(strings.Repeat(fmt.Sprintf("%04d-%d ", i, round), 1024/8))
}

func adoptedData(i, round int) map[string]any {
	return map[string]any{"owner": fmt.Sprintf("team-%02d", i/(adoptedPerFile*adoptedPerTeam)), "payload": adoptedPayload(i, round)}
}

// teamFolder is the team's folder as a person writes it: a comment on top of each file, its
// documents without a namespace, a kustomization beside them that gives the namespace.
func teamFolder(ns string) map[string]string {
	files := map[string]string{}
	for i := 0; i < adoptedObjects; i += adoptedPerFile {
		var b strings.Builder
		fmt.Fprintf(&b, "# %s: settings kept by hand, applied by Flux.\n", strings.TrimSuffix(filepath.Base(adoptedFile(i)), ".yaml"))
		for j := i; j < i+adoptedPerFile; j++ {
			d := adoptedData(j, 0)
			fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  owner: %s\n  payload: %s\n", adoptedName(j), d["owner"], d["payload"])
		}
		files[adoptedFile(i)] = b.String()
	}
	for t := range adoptedObjects / (adoptedPerFile * adoptedPerTeam) {
		var b strings.Builder
		fmt.Fprintf(&b, "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: %s\nresources:\n", ns)
		for f := range adoptedPerTeam {
			fmt.Fprintf(&b, "- config-%02d.yaml\n", f)
		}
		files[fmt.Sprintf("apps/team-%02d/kustomization.yaml", t)] = b.String()
	}
	return files
}

// layoutBench is one layout's run: its namespace, its remote, and how the remote is checked.
type layoutBench struct {
	tb      testing.TB
	ns      string
	srv     *testenv.GitServer
	repo    string
	dyn     dynamic.ResourceInterface
	writers *mirrorBench // for parallel
	// expect records an object's live state as what the remote must end up holding; landed
	// waits for a commit of the remote that holds all of it and says when it was first seen.
	expect func(name string, live *unstructured.Unstructured)
	landed func(deadline time.Duration) time.Time
}

// layoutFigures are what one layout's run measured.
type layoutFigures struct {
	seed, updateAll time.Duration
	lags            []time.Duration
	// rssMiB and cpuSec are read after each phase: the seed, the single changes, the update of
	// all; the last are the whole run's.
	rssMiB, cpuSec      [3]float64
	commits, lagCommits int
	pushed, lagPushed   int64
	files               int
}

// applyAll applies the 2,000 objects at round 0 as Flux does.
func (l *layoutBench) applyAll() {
	force := true
	l.writers.parallel(0, adoptedObjects, func(ctx context.Context, i int) error {
		obj := map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": adoptedName(i), "namespace": l.ns}, "data": adoptedData(i, 0)}
		body, err := json.Marshal(obj)
		if err != nil {
			return err
		}
		got, err := l.dyn.Patch(ctx, adoptedName(i), types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: "kustomize-controller", Force: &force})
		if err == nil {
			l.expect(adoptedName(i), got)
		}
		return err
	})
}

// edit changes object i's payload to round's as kubectl edit does.
func (l *layoutBench) edit(ctx context.Context, i, round int) error {
	patch := fmt.Sprintf(`{"data":{"payload":%q}}`, adoptedPayload(i, round))
	got, err := l.dyn.Patch(ctx, adoptedName(i), types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "kubectl-edit"})
	if err == nil {
		l.expect(adoptedName(i), got)
	}
	return err
}

func (l *layoutBench) mustEdit(i, round int) {
	if err := l.edit(context.Background(), i, round); err != nil {
		l.tb.Fatal(err)
	}
}

func (l *layoutBench) commitCount() int {
	log, err := l.srv.Log(l.repo, "main")
	if err != nil {
		l.tb.Fatal(err)
	}
	return len(log)
}

// run starts the daemon and measures: the seed (daemon start → a change made right after start
// is on the remote, with everything else the remote must hold), one change after a quiet
// spell, all 2,000 changed, the daemon's peak RSS and CPU, and the bytes pushed per commit.
func (l *layoutBench) run() layoutFigures {
	var f layoutFigures
	before, commitsBefore := l.srv.PushedBytes(), l.commitCount()
	start := time.Now()
	d := startDaemon(l.tb, l.tb.TempDir(), "--namespace", fmt.Sprintf("bench-home-%d", time.Now().UnixNano()))
	l.mustEdit(adoptedObjects-1, 1) // the last object a list reads
	f.seed = l.landed(adoptedDeadline).Sub(start)
	f.rssMiB[0], f.cpuSec[0] = usage(l.tb, d.Pid())

	lagPushed, lagCommits := l.srv.PushedBytes(), l.commitCount()
	for r := range adoptedLagRuns {
		time.Sleep(2 * time.Second) // a quiet spell longer than the 1.5 s quiet period
		i := (r*397 + 11) % adoptedObjects
		at := time.Now()
		l.mustEdit(i, 100+r)
		f.lags = append(f.lags, l.landed(time.Minute).Sub(at))
	}
	f.lagPushed, f.lagCommits = l.srv.PushedBytes()-lagPushed, l.commitCount()-lagCommits
	f.rssMiB[1], f.cpuSec[1] = usage(l.tb, d.Pid())

	time.Sleep(2 * time.Second)
	l.writers.parallel(0, adoptedObjects, func(ctx context.Context, i int) error { return l.edit(ctx, i, 200) })
	last := time.Now()
	f.updateAll = l.landed(adoptedDeadline).Sub(last)

	f.rssMiB[2], f.cpuSec[2] = usage(l.tb, d.Pid())
	f.pushed, f.commits = l.srv.PushedBytes()-before, l.commitCount()-commitsBefore
	files, err := l.srv.Files(l.repo, "main")
	if err != nil {
		l.tb.Fatal(err)
	}
	f.files = len(files)
	d.Stop(l.tb)
	return f
}

// canonicalBench is the canonical run: mirrorSetup's destination (folder live/, repository
// "state"), checked as BenchmarkMirror2000 checks it.
func canonicalBench(b *testing.B, ns string) *layoutBench {
	m := newMirrorBench(b, ns)
	return &layoutBench{tb: b, ns: ns, srv: m.srv, repo: "state", dyn: m.dyn, writers: m,
		expect: m.expect, landed: m.mustLand}
}

// adoptedBench is the adopted run: the team's folder pushed to repository "team" as a person
// pushes it, and a destination of layout Existing on its folder apps/.
func adoptedBench(b *testing.B, ns string) *layoutBench {
	srv, dyn := teamRepository(b, ns, teamFolder(ns), crds.GitDestinationSpec{BaseFolder: "apps", Layout: crds.LayoutExisting}, "configmaps")
	r := &teamRemote{tb: b, srv: srv, dir: filepath.Join(srv.Root, teamRepo+".git"), want: map[string]map[string]string{}, blobs: map[string]map[string]map[string]string{}}
	return &layoutBench{tb: b, ns: ns, srv: srv, repo: teamRepo, dyn: dyn.Resource(configMaps).Namespace(ns), writers: &mirrorBench{tb: b},
		expect: r.expect, landed: r.mustLand}
}

// teamRepository pushes files to a new repository "team" as a person pushes them, and points a
// destination of spec (its repository and branch set here) at it, in a new namespace ns, whose
// rule selects resources: a team's repository as the daemon finds it.
func teamRepository(b *testing.B, ns string, files map[string]string, spec crds.GitDestinationSpec, resources ...string) (*testenv.GitServer, dynamic.Interface) {
	cp := planes.Of(b)
	ctx := context.Background()
	srv := testenv.MustGitServer(b, "daemon", "pw", teamRepo)
	if err := srv.UpkeepByHand(teamRepo); err != nil {
		b.Fatal(err)
	}
	if _, err := srv.PushCommit(teamRepo, "main", testenv.Signature{Name: "Team", Email: "team@example.com"}, "the team's apps", files, nil); err != nil {
		b.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(cp.AdminConfig())
	dyn := dynamic.NewForConfigOrDie(cp.AdminConfig())
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "git", Namespace: ns},
		StringData: map[string]string{"username": "daemon", "password": "pw"}}
	if _, err := kube.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if err := crds.Install(ctx, cp.AdminConfig(), discardLogger()); err != nil {
		b.Fatal(err)
	}
	spec.RepoRef, spec.Branch = crds.NamespacedReference{Name: "repo"}, "main"
	for _, o := range []struct {
		gvr schema.GroupVersionResource
		obj any
	}{
		{crds.GitRepoConfigs, &crds.GitRepoConfig{ObjectMeta: metav1.ObjectMeta{Name: "repo", Namespace: ns},
			Spec: crds.GitRepoConfigSpec{RepoURL: srv.RepoURL(teamRepo), AllowedBranches: []string{"main"}, SecretRef: &crds.LocalReference{Name: "git"}}}},
		{crds.GitDestinations, &crds.GitDestination{ObjectMeta: metav1.ObjectMeta{Name: "dest", Namespace: ns}, Spec: spec}},
		{crds.WatchRules, &crds.WatchRule{ObjectMeta: metav1.ObjectMeta{Name: "team", Namespace: ns},
			Spec: crds.WatchRuleSpec{DestinationRef: crds.NamespacedReference{Name: "dest"}, Rules: []crds.ResourceRule{{Resources: resources}}}}},
	} {
		u, err := crds.ToUnstructured(o.obj)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := dyn.Resource(o.gvr).Namespace(ns).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	b.Cleanup(func() {
		for _, gvr := range []schema.GroupVersionResource{crds.WatchRules, crds.GitDestinations, crds.GitRepoConfigs} {
			_ = dyn.Resource(gvr).Namespace(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		}
	})
	return srv, dyn
}

// teamRemote checks the team's folder on the remote: every object's document holds the data
// the cluster has. Each new tip of the branch is read by the files that changed since the last
// one read (a blob read once is remembered parsed), not by the whole folder again.
type teamRemote struct {
	tb    testing.TB
	srv   *testenv.GitServer
	dir   string // the bare repository
	mu    sync.Mutex
	want  map[string]map[string]string            // object → its data
	blobs map[string]map[string]map[string]string // blob → object → data, parsed
}

func (r *teamRemote) expect(name string, live *unstructured.Unstructured) {
	data, _, err := unstructured.NestedStringMap(live.Object, "data")
	if err != nil {
		r.tb.Error(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.want[name] = data
}

// mustLand watches the branch's tip until a commit's folder holds exactly what the cluster
// does, and returns when that tip was first seen.
func (r *teamRemote) mustLand(deadline time.Duration) time.Time {
	r.tb.Helper()
	end := time.Now().Add(deadline)
	last, why := "", "no commit read"
	for time.Now().Before(end) {
		sha, err := r.srv.BranchTip(teamRepo, "main")
		if err != nil || sha == "" || sha == last {
			time.Sleep(tipPoll)
			continue
		}
		seen := time.Now()
		last = sha
		var ok bool
		if ok, why = r.holds(sha); ok {
			return seen
		}
	}
	r.tb.Fatalf("the team's folder did not match the cluster within %v: %s", deadline, why)
	return time.Time{}
}

// holds says whether commit sha holds every object's data as the cluster has it, and else
// what differs.
func (r *teamRemote) holds(sha string) (bool, string) {
	out, err := exec.Command("git", "--git-dir", r.dir, "ls-tree", "-r", "-z", sha, "apps/").Output()
	if err != nil {
		return false, err.Error()
	}
	var blobs []string
	for entry := range strings.SplitSeq(string(out), "\x00") {
		meta, _, ok := strings.Cut(entry, "\t")
		if fields := strings.Fields(meta); ok && len(fields) == 3 && fields[1] == "blob" {
			blobs = append(blobs, fields[2])
		}
	}
	if err := r.read(blobs); err != nil {
		return false, err.Error()
	}
	got := map[string]map[string]string{}
	for _, blob := range blobs {
		maps.Copy(got, r.blobs[blob])
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var differ []string
	for _, name := range slices.Sorted(maps.Keys(r.want)) {
		if !maps.Equal(got[name], r.want[name]) {
			differ = append(differ, name)
		}
	}
	if len(differ) == 0 {
		return true, ""
	}
	return false, fmt.Sprintf("%d objects differ, the first %s", len(differ), differ[0])
}

// read parses the blobs not read yet, in one git cat-file.
func (r *teamRemote) read(blobs []string) error {
	var todo []string
	for _, b := range blobs {
		if _, ok := r.blobs[b]; !ok {
			todo = append(todo, b)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	cmd := exec.Command("git", "--git-dir", r.dir, "cat-file", "--batch")
	cmd.Stdin = strings.NewReader(strings.Join(todo, "\n") + "\n")
	out, err := cmd.Output()
	if err != nil {
		return err
	}
	rd := bufio.NewReader(bytes.NewReader(out))
	for range todo {
		header, err := rd.ReadString('\n')
		if err != nil {
			return err
		}
		fields := strings.Fields(header) // <hash> blob <size>
		if len(fields) != 3 {
			return fmt.Errorf("cat-file: %q", header)
		}
		size, err := strconv.Atoi(fields[2])
		if err != nil {
			return err
		}
		content := make([]byte, size+1) // and its newline
		if _, err := io.ReadFull(rd, content); err != nil {
			return err
		}
		r.blobs[fields[0]] = configMapData(content[:size])
	}
	return nil
}

// configMapData reads the data of every ConfigMap document of a file, by name.
func configMapData(content []byte) map[string]map[string]string {
	out := map[string]map[string]string{}
	dec := yaml.NewDecoder(bytes.NewReader(content))
	for {
		var doc struct {
			Kind     string                `yaml:"kind"`
			Metadata struct{ Name string } `yaml:"metadata"`
			Data     map[string]string     `yaml:"data"`
		}
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) || err != nil && !strings.Contains(err.Error(), "cannot unmarshal") {
			return out // a file that does not parse holds nothing the check wants
		}
		if doc.Kind == "ConfigMap" && doc.Metadata.Name != "" {
			out[doc.Metadata.Name] = doc.Data
		}
	}
}

// BenchmarkAdopted2000 prints issue 59's figures of an adopted folder beside canonical mode's
// for 2,000 ConfigMaps (200 files in the adopted folder), and their ratio.
func BenchmarkAdopted2000(b *testing.B) {
	planes.Lend(b)
	for range b.N {
		stamp := time.Now().UnixNano()
		canonical := canonicalBench(b, fmt.Sprintf("bench-canonical-%d", stamp))
		canonical.applyAll()
		c := canonical.run()
		canonical.writers.forget()

		adopted := adoptedBench(b, fmt.Sprintf("bench-adopted-%d", stamp))
		adopted.applyAll()
		a := adopted.run()
		reportLayouts(c, a)
	}
}

func reportLayouts(c, a layoutFigures) {
	ratio := func(a, c float64) string {
		if c == 0 {
			return "×-"
		}
		return fmt.Sprintf("×%.2f", a/c)
	}
	secs := func(what string, c, a time.Duration) {
		report("  %s: canonical %.2f s, adopted %.2f s (%s)", what, c.Seconds(), a.Seconds(), ratio(a.Seconds(), c.Seconds()))
	}
	slices.Sort(c.lags)
	slices.Sort(a.lags)
	ms := func(d []time.Duration, i int) float64 { return float64(d[i].Milliseconds()) }
	n := len(c.lags)
	report("layouts, 2,000 ConfigMaps of ~1 KiB applied by kustomize-controller; canonical: 2,000 files of the daemon's; adopted (layout Existing): the team's 200 files of 10 documents in 10 kustomize folders, %d files in all on the remote", a.files)
	secs("seed: daemon start → a change made right after start on the remote (canonical: with all 2,000 files; adopted: the seed commits nothing, so this is the folder indexed and every object's intent computed)", c.seed, a.seed)
	report("  one change (kubectl edit) after a 2 s quiet spell → on the remote, min/median/max of %d: canonical %.0f/%.0f/%.0f ms, adopted %.0f/%.0f/%.0f ms (%s/%s/%s)", n,
		ms(c.lags, 0), ms(c.lags, n/2), ms(c.lags, n-1), ms(a.lags, 0), ms(a.lags, n/2), ms(a.lags, n-1),
		ratio(ms(a.lags, 0), ms(c.lags, 0)), ratio(ms(a.lags, n/2), ms(c.lags, n/2)), ratio(ms(a.lags, n-1), ms(c.lags, n-1)))
	secs("update all 2,000 (kubectl edit, 8 writers; adopted: a one-line edit each in multi-document files): last write → remote matches", c.updateAll, a.updateAll)
	report("  peak RSS over the run: canonical %.0f MiB, adopted %.0f MiB (%s); after the seed %.0f and %.0f MiB, after the single changes %.0f and %.0f MiB",
		c.rssMiB[2], a.rssMiB[2], ratio(a.rssMiB[2], c.rssMiB[2]), c.rssMiB[0], a.rssMiB[0], c.rssMiB[1], a.rssMiB[1])
	phase := func(f layoutFigures, i int) float64 {
		if i == 0 {
			return f.cpuSec[0]
		}
		return f.cpuSec[i] - f.cpuSec[i-1]
	}
	report("  CPU over the run: canonical %.2f s, adopted %.2f s (%s); of it the seed %.2f and %.2f s (%s), the single changes %.2f and %.2f s (%s), the update of all %.2f and %.2f s (%s)",
		c.cpuSec[2], a.cpuSec[2], ratio(a.cpuSec[2], c.cpuSec[2]),
		phase(c, 0), phase(a, 0), ratio(phase(a, 0), phase(c, 0)),
		phase(c, 1), phase(a, 1), ratio(phase(a, 1), phase(c, 1)),
		phase(c, 2), phase(a, 2), ratio(phase(a, 2), phase(c, 2)))
	perCommit := func(bytes int64, commits int) float64 {
		if commits == 0 {
			return 0
		}
		return float64(bytes) / float64(commits)
	}
	cl, al := perCommit(c.lagPushed, c.lagCommits), perCommit(a.lagPushed, a.lagCommits)
	report("  bytes pushed per commit of one change: canonical %.0f B (%d commits), adopted %.0f B (%d commits) (%s)", cl, c.lagCommits, al, a.lagCommits, ratio(al, cl))
	cr, ar := perCommit(c.pushed, c.commits), perCommit(a.pushed, a.commits)
	report("  bytes pushed per commit over the run: canonical %.0f B (%d commits, %d KiB), adopted %.0f B (%d commits, %d KiB) (%s)",
		cr, c.commits, c.pushed>>10, ar, a.commits, a.pushed>>10, ratio(ar, cr))
}
