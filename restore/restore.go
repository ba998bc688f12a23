package restore

import (
	"context"
	"fmt"
	"io"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/configbutler/gitops-reverser/kube"
)

// FieldManager is the field manager of every apply a restore makes: the fields it sets are its
// own, apart from the mirror's and the daemon's.
const FieldManager = "gitops-reverser-restore"

// Outcome is what became of one object.
type Outcome string

// The outcomes, in the order the summary prints them.
const (
	Created   Outcome = "created"
	Changed   Outcome = "changed"
	Unchanged Outcome = "unchanged"
	LeftOut   Outcome = "left out" // by default (Result.Reason says why) or by --only/--exclude
	Skipped   Outcome = "skipped"  // could not be read here: an encrypted Secret without its key
	Failed    Outcome = "failed"
)

// Outcomes lists every Outcome in the order a summary prints them.
var Outcomes = []Outcome{Created, Changed, Unchanged, LeftOut, Skipped, Failed}

// Result is what became of one object of the source.
type Result struct {
	Path                  string // the file, under the folder
	Kind, Namespace, Name string
	Outcome               Outcome
	Reason                string // why it was left out, skipped or failed
}

// Options is one restore.
type Options struct {
	// Config reaches the cluster as the person restoring: every request is theirs.
	Config *rest.Config
	Source Source
	// DryRun applies with the server's dry run: what would be created and changed, nothing stored.
	DryRun bool
	// IncludeConfiguration restores gitops-reverser's own configuration objects too.
	IncludeConfiguration bool
	// Only and Exclude select by kind and namespace (see Selector).
	Only, Exclude []Selector
	// Identities are the age identities that decrypt SOPS-encrypted Secrets; none: they are
	// skipped.
	Identities []string
	// Workers is how many applies run at once within a wave; 0 means 16.
	Workers int
	// Progress is told of each object done; nil: nothing.
	Progress func(done, total int, r Result)

	crdTimeout time.Duration // how long the CRDs may take to be Established; 0: crdEstablishTimeout
}

// Summary is a whole restore.
type Summary struct {
	Commit  string    // the commit read, when read from Git
	When    time.Time // its commit time
	Results []Result  // one an object (or file that held none to read), in the order restored
}

// Count is how many results have outcome o.
func (s Summary) Count(o Outcome) int {
	n := 0
	for _, r := range s.Results {
		if r.Outcome == o {
			n++
		}
	}
	return n
}

// crdEstablishTimeout bounds the wait for the CRDs restored to be served.
const crdEstablishTimeout = 60 * time.Second

// Run restores the objects of opts.Source into the cluster: it reads and decrypts the files,
// leaves out what is not to be restored, and applies the rest in waves (see waveCRDs). A failed
// object does not stop the others; the error is for a restore that could not run at all.
func Run(ctx context.Context, opts Options) (Summary, error) {
	files, rev, err := opts.Source.read(ctx)
	if err != nil {
		return Summary{}, err
	}
	var sum Summary
	if rev != nil {
		sum.Commit, sum.When = rev.commit, rev.when
	}
	a, err := newApplier(opts)
	if err != nil {
		return sum, err
	}
	items := parse(files, opts.Identities)
	todo := a.choose(items)
	a.total = len(todo)
	crds, rest := a.splitCRDs(todo)
	if err := a.discover(ctx); err != nil {
		return sum, fmt.Errorf("discover what the cluster serves: %w", err)
	}
	a.applyWave(ctx, crds)
	if err := a.awaitEstablished(ctx, crds); err != nil {
		return sum, fmt.Errorf("discover what the cluster serves once the CRDs are in: %w", err)
	}
	for _, wave := range waves(a.resolve(rest)) {
		a.applyWave(ctx, wave)
	}
	for i := range items {
		sum.Results = append(sum.Results, items[i].Result)
	}
	return sum, nil
}

// Client limits of a restore, unless the config sets its own: far above client-go's default of 5
// requests a second, since a restore is thousands of them; the apiserver's priority and fairness
// keeps one person's restore from crowding out the others.
const (
	clientQPS   = 500
	clientBurst = 1000
)

// newApplier connects to the cluster as opts.Config says.
func newApplier(opts Options) (*applier, error) {
	cfg := rest.CopyConfig(opts.Config)
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = clientQPS, clientBurst
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("build a client: %w", err)
	}
	api, err := kube.RESTClient(cfg)
	if err != nil {
		return nil, err
	}
	workers := opts.Workers
	if workers <= 0 {
		workers = 16
	}
	return &applier{opts: opts, dyn: dyn, api: api,
		workers: workers, crdKinds: map[schema.GroupKind]*item{}, newNamespaces: map[string]bool{}}, nil
}

// Print writes the summary table: a row a kind with its count of each outcome, a total, then
// every object skipped or failed with its reason, and what was left out by reason.
func (s Summary) Print(w io.Writer, dryRun bool) {
	printSummary(w, s, dryRun)
}
