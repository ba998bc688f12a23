package gitops

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"

	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/configbutler/gitops-reverser/metrics"
)

// PoolConfig holds the daemon-wide settings of every Git worker. Metrics, Log, OnChange and
// OnHeldChange may be nil.
type PoolConfig struct {
	Secrets  corev1client.SecretsGetter // reads and watches the repositories' credential Secrets
	WorkDir  string                     // clones live in WorkDir/WorkerKey(url, branch)
	Limits   BatchLimits
	Identity Identity
	// MaxWorkers and MaxWorkersPerRepo bound how many workers commit and push at once, in all
	// and per repository; ≤ 0 means unbounded.
	MaxWorkers, MaxWorkersPerRepo int
	Metrics                       *metrics.Mirror
	Log                           *slog.Logger
	// OnChange is told, without blocking, whenever RepoState or Status may say something new: a
	// credentials Secret changed, a reachability check ended, a worker started or stopped
	// failing or coalesced its queue.
	OnChange func()
	// OnHeldChange is told, without blocking (it is called from the worker's goroutine), that
	// the mirror change remembered for a held path (see Hold) differs from the one remembered
	// before it. It may be nil.
	OnHeldChange func(url, branch, path string)
	// Fence, when set, is asked just before every push (see Fence); nil means this replica
	// always may push.
	Fence Fence
}

// Repository is a GitRepoConfig as the pool needs it.
type Repository struct {
	Name      string     // namespace/name of the GitRepoConfig
	URL       string     // without credentials
	SecretRef *SecretRef // nil: the remote needs no credentials
	Signing   *Signing   // nil: commits are not signed
}

// Signing says how the commits of a repository are signed: with the private key in a Secret
// (key signingKey, and passphrase when the key is encrypted).
type Signing struct {
	Format string // SigningSSH or SigningOpenPGP
	Secret SecretRef
}

// The formats of commit signatures.
const (
	SigningSSH     = "ssh"     // SSHSIG with namespace git, as git's gpg.format=ssh writes it
	SigningOpenPGP = "openpgp" // an armored detached OpenPGP signature, as gpg writes it
)

// SigningKey is the public side of a repository's signing key, to register with its Git host.
type SigningKey struct {
	Format string
	// PublicKey is an authorized_keys line (ssh) or an armored public key block (openpgp).
	PublicKey string
	// Fingerprint is SHA256:… (ssh) or the key's 40-hex fingerprint (openpgp).
	Fingerprint string
}

// SecretRef names a Secret.
type SecretRef struct{ Namespace, Name string }

// Branch asks for a worker on a branch of a repository (by Repository.Name).
type Branch struct{ Repo, Branch string }

// RepoState is what the pool knows of a repository.
type RepoState struct {
	// Usable: credentials are loaded (or none are needed), so workers may run.
	Usable bool
	// Checked: the remote was contacted with these credentials; Reachable says how it went.
	Checked, Reachable bool
	// Reason and Message explain the state: SecretInvalid, SecretUnreadable, SigningKeyInvalid,
	// Unreachable, Reachable, or Checking while the first contact is under way.
	Reason, Message string
	// SigningKey is the key commits are signed with; nil when they are not signed.
	SigningKey *SigningKey
}

// Pool is the one owner of the Git workers: one per (repository URL, branch), created and
// stopped by SetWorkers, with the credentials of their GitRepoConfig (followed through a watch
// on the referenced Secrets) and a reachability check per remote. Its methods are safe from any
// goroutine; everything it starts is joined by Run.
type Pool struct {
	cfg    PoolConfig
	slots  *Slots
	log    *slog.Logger
	ctx    context.Context // parent of everything the pool starts; cancelled when Run ends
	cancel context.CancelFunc
	wg     sync.WaitGroup
	holds  *holdTable // the paths the mirror keeps off, by branch (see Hold)

	mu       sync.Mutex
	closed   bool
	repos    map[string]*repoEntry      // by Repository.Name
	workers  map[string]*poolWorker     // by WorkerKey(url, branch)
	stopping map[string]chan struct{}   // workers making their last push, by key
	secrets  map[SecretRef]*secretWatch // one watch per referenced Secret
	reach    map[string]*reachCheck     // by URL and credentials
}

type repoEntry struct {
	repo    Repository
	creds   fromSecret[credentials] // problem SecretInvalid when unusable
	signing fromSecret[signer]      // nil value: commits are not signed; problem SigningKeyInvalid
}

// ready reports whether workers may push: with credentials and, when asked for, a signing key.
func (e *repoEntry) ready() bool { return e.creds.usable && e.signing.usable }

type poolWorker struct {
	w        *Worker
	repo     string // the Repository whose credentials it uses
	credsKey string
	signer   signer // the signer it was last given
	cancel   context.CancelFunc
	done     chan struct{}
}

// NewPool creates an empty pool; workers start when SetWorkers asks for them.
func NewPool(cfg PoolConfig) *Pool {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.OnChange == nil {
		cfg.OnChange = func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Pool{
		cfg: cfg, slots: NewSlots(cfg.MaxWorkers, cfg.MaxWorkersPerRepo), log: cfg.Log,
		ctx: ctx, cancel: cancel, holds: newHoldTable(cfg.OnHeldChange),
		repos: map[string]*repoEntry{}, workers: map[string]*poolWorker{}, stopping: map[string]chan struct{}{},
		secrets: map[SecretRef]*secretWatch{}, reach: map[string]*reachCheck{},
	}
}

// Run waits until ctx ends, then stops every worker (each makes a last, bounded push), every
// Secret watch and reachability check, and returns once all of them have.
func (p *Pool) Run(ctx context.Context) error {
	<-ctx.Done()
	p.mu.Lock()
	p.closed = true
	for _, pw := range p.workers {
		pw.cancel()
	}
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
	return nil
}

// SetRepositories declares the repositories: their credentials are loaded (and their Secrets
// watched), their remotes checked in the background, and workers of a repository whose
// credentials changed use the new ones. It returns the state of each, by name.
func (p *Pool) SetRepositories(ctx context.Context, repos []Repository) map[string]RepoState {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	out := make(map[string]RepoState, len(repos))
	wantSecrets := map[SecretRef]bool{}
	seen := map[string]bool{}
	for _, r := range repos {
		seen[r.Name] = true
		e := p.repos[r.Name]
		if e == nil || e.repo.URL != r.URL || !sameRef(e.repo.SecretRef, r.SecretRef) || !sameSigning(e.repo.Signing, r.Signing) {
			e = &repoEntry{repo: r}
			p.repos[r.Name] = e
		}
		if r.SecretRef != nil {
			wantSecrets[*r.SecretRef] = true
			p.watchSecret(*r.SecretRef)
		}
		if r.Signing != nil {
			wantSecrets[r.Signing.Secret] = true
			p.watchSecret(r.Signing.Secret)
		}
		p.loadCredentials(ctx, e)
		p.loadSigner(ctx, e)
		out[r.Name] = p.state(e)
	}
	for name := range p.repos {
		if !seen[name] {
			delete(p.repos, name)
		}
	}
	for ref, sw := range p.secrets {
		if !wantSecrets[ref] {
			sw.cancel()
			delete(p.secrets, ref)
		}
	}
	p.updateAuth()
	return out
}

func sameRef(a, b *SecretRef) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}

func sameSigning(a, b *Signing) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}

// state is the repository's state, starting a reachability check when none is known.
func (p *Pool) state(e *repoEntry) RepoState {
	switch {
	case e.creds.problem != "" && !e.creds.usable:
		return RepoState{Reason: e.creds.problem, Message: e.creds.detail}
	case e.signing.problem != "" && !e.signing.usable:
		return RepoState{Reason: e.signing.problem, Message: e.signing.detail + "; nothing is pushed until commits can be signed"}
	}
	rc := p.reachability(e.repo.URL, e.creds.value)
	s := RepoState{Usable: true, Checked: rc.done, Reachable: rc.done && rc.err == nil}
	if e.signing.value != nil {
		key := e.signing.value.public()
		s.SigningKey = &key
	}
	switch {
	case e.creds.problem != "":
		s.Reason, s.Message = e.creds.problem, e.creds.detail+"; using the credentials read before"
	case e.signing.problem != "":
		s.Reason, s.Message = e.signing.problem, e.signing.detail+"; signing with the key read before"
	case !rc.done:
		s.Reason, s.Message = "Checking", "contacting "+e.repo.URL
	case rc.err != nil:
		s.Reason, s.Message = "Unreachable", "cannot list "+e.repo.URL+": "+rc.err.Error()
	default:
		s.Reason, s.Message = "Reachable", "remote "+e.repo.URL+" answers"
	}
	return s
}

// updateAuth hands changed credentials and signing keys to the running workers of their
// repository.
func (p *Pool) updateAuth() {
	for _, pw := range p.workers {
		e := p.repos[pw.repo]
		if e == nil || !e.ready() {
			continue
		}
		if e.creds.value.key != pw.credsKey {
			pw.credsKey = e.creds.value.key
			pw.w.SetAuth(e.creds.value.auth)
			p.log.Info("credentials changed; the worker uses the new ones", "repo", redactURL(e.repo.URL), "branch", pw.w.remote.Branch)
		}
		if e.signing.value != pw.signer {
			pw.signer = e.signing.value
			pw.w.setSigner(pw.signer)
			p.log.Info("commit signing changed; the worker signs the commits it has not pushed yet with it", "repo", redactURL(e.repo.URL),
				"branch", pw.w.remote.Branch, "key", keyOf(pw.signer))
		}
	}
}

func keyOf(s signer) string {
	if s == nil {
		return "none"
	}
	return s.public().Fingerprint
}

// SetWorkers runs exactly one worker per wanted branch of a usable repository. A worker no
// longer wanted stops in the background after a last push of what it holds; the same branch
// asked for again waits for that before it opens the clone.
func (p *Pool) SetWorkers(wants []Branch) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	want := map[string]Branch{}
	for _, b := range wants {
		if e := p.repos[b.Repo]; e != nil && e.ready() {
			want[WorkerKey(e.repo.URL, b.Branch)] = b
		}
	}
	for k, pw := range p.workers {
		b, ok := want[k]
		if !ok {
			pw.cancel()
			p.stopping[k] = pw.done
			delete(p.workers, k)
			continue
		}
		if b.Repo != pw.repo { // another GitRepoConfig of the same URL: updateAuth gives its credentials and key
			pw.repo, pw.credsKey = b.Repo, "\x00unknown"
		}
	}
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if p.workers[k] == nil {
			p.startWorker(k, want[k])
		}
	}
	p.updateAuth()
}

func (p *Pool) startWorker(key string, b Branch) {
	e := p.repos[b.Repo]
	ctx, cancel := context.WithCancel(p.ctx)
	pw := &poolWorker{repo: b.Repo, credsKey: e.creds.value.key, signer: e.signing.value, cancel: cancel, done: make(chan struct{})}
	pw.w = NewWorker(WorkerConfig{
		Remote:   Remote{URL: e.repo.URL, Branch: b.Branch, Auth: e.creds.value.auth},
		WorkDir:  p.cfg.WorkDir,
		Limits:   p.cfg.Limits,
		Identity: p.cfg.Identity,
		Slots:    p.slots,
		Metrics:  p.cfg.Metrics,
		Log:      p.log,
		OnStatus: func() { p.workerChanged(pw) },
		Fence:    p.cfg.Fence,
		signer:   e.signing.value,
	})
	pw.w.holds = p.holds.forKey(e.repo.URL, b.Branch)
	previous := p.stopping[key]
	delete(p.stopping, key)
	p.workers[key] = pw
	p.wg.Go(func() {
		defer close(pw.done)
		if previous != nil {
			<-previous // one clone, one goroutine: the old worker's last push comes first
		}
		if err := pw.w.Run(ctx); err != nil {
			p.log.Error("git worker stopped", "repo", redactURL(e.repo.URL), "branch", b.Branch, "err", err)
		}
	})
}

// workerChanged learns from a worker that started or stopped failing: a worker whose push or
// fetch works proves its remote reachable.
func (p *Pool) workerChanged(pw *poolWorker) {
	if pw.w.Status().LastError == nil {
		p.mu.Lock()
		for k, rc := range p.reach {
			if strings.HasPrefix(k, pw.w.remote.URL+"\x00") {
				rc.done, rc.err = true, nil
			}
		}
		p.mu.Unlock()
	}
	p.cfg.OnChange()
}

// Sink is the worker of a branch, for the changes of the destinations that write into it.
func (p *Pool) Sink(url, branch string) (Sink, bool) {
	w := p.worker(url, branch)
	return w, w != nil
}

// Fetch makes the worker of a branch fetch its remote now, e.g. because a push webhook said
// the branch moved, and returns the new tip.
func (p *Pool) Fetch(ctx context.Context, url, branch string) (FetchResult, error) {
	w := p.worker(url, branch)
	if w == nil {
		return FetchResult{}, ErrStopped
	}
	return w.Fetch(ctx)
}

// WorkerStatus is the status of the worker of a branch, if it runs.
func (p *Pool) WorkerStatus(url, branch string) (WorkerStatus, bool) {
	w := p.worker(url, branch)
	if w == nil {
		return WorkerStatus{}, false
	}
	return w.Status(), true
}

// Status is a snapshot of every running worker, ordered by repository and branch.
func (p *Pool) Status() []WorkerStatus {
	p.mu.Lock()
	out := make([]WorkerStatus, 0, len(p.workers))
	for _, pw := range p.workers {
		out = append(out, pw.w.Status())
	}
	p.mu.Unlock()
	slices.SortFunc(out, func(a, b WorkerStatus) int {
		return strings.Compare(a.URL+"\x00"+a.Branch, b.URL+"\x00"+b.Branch)
	})
	return out
}

func (p *Pool) worker(url, branch string) *Worker {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pw := p.workers[WorkerKey(url, branch)]; pw != nil {
		return pw.w
	}
	return nil
}
