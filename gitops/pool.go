package gitops

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport"

	"github.com/configbutler/gitops-reverser/metrics"
)

// PoolConfig holds the daemon-wide settings of every Git worker. Metrics, Log and OnChange may
// be nil.
type PoolConfig struct {
	WorkDir  string // clones live in WorkDir/WorkerKey(url, branch)
	Limits   BatchLimits
	Identity Identity
	// MaxWorkers and MaxWorkersPerRepo bound how many workers commit and push at once, in all
	// and per repository; ≤ 0 means unbounded.
	MaxWorkers, MaxWorkersPerRepo int
	Metrics                       *metrics.Mirror
	Log                           *slog.Logger
	// OnChange is told, without blocking, whenever Status may say something new: a worker
	// started or stopped failing or coalesced its queue.
	OnChange func()
	// Fences, when set, gives the Fence each worker asks just before every push (see Fence);
	// nil means this replica always may push.
	Fences Fences
	// Deliveries builds the Delivery of a branch that delivers by pull request, with the
	// repository's credentials; it is asked again when they change. Needed only for such
	// branches.
	Deliveries func(r Repository, b Branch) (Delivery, error)
	// Ours recognises the daemon's own commits (see WorkerConfig.Ours).
	Ours func(message string) bool
	// RequestPoll: see WorkerConfig.RequestPoll.
	RequestPoll time.Duration
}

// Repository is a GitRepoConfig as the pool needs it: its remote, and the credentials and
// signing key already read from wherever they are kept (package gitsecrets reads them from
// Secrets).
type Repository struct {
	Name        string      // namespace/name of the GitRepoConfig
	URL         string      // without credentials
	Credentials Credentials // zero: the remote needs none
	Signer      Signer      // nil: commits are not signed
}

// Credentials are how workers authenticate to a remote. Key identifies their content, so
// workers are handed rotated credentials, and only then.
type Credentials struct {
	Auth transport.AuthMethod // nil = none
	Key  string
	// APIToken is the token of the Git host's API, for the pull requests of branches that
	// deliver by one; "" when the Secret holds none.
	APIToken string
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

// Branch asks for a worker on a branch of a repository (by Repository.Name).
type Branch struct {
	Repo, Branch string
	// Request, when set, delivers the changes by a pull request from its head branch instead of
	// pushing to Branch; the worker is then known by its head branch (Remote.Lane).
	Request *RequestSettings
}

// lane is the branch a worker of b pushes to.
func (b Branch) lane() string {
	if b.Request != nil {
		return b.Request.Head
	}
	return b.Branch
}

// RequestSettings are how a branch's pull request is opened.
type RequestSettings struct {
	Head        string // the head branch, the daemon's own
	Provider    string // the host's kind: gitea, github or gitlab
	APIURL      string // "" derives it from the repository's URL
	Labels      []string
	Draft       bool
	Destination string // namespace/name of the GitDestination, for the request's text
	Folder      string
}

// Pool is the one owner of the Git workers: one per (repository URL, branch), created and
// stopped by SetWorkers, with the credentials and signing key of their GitRepoConfig (handed in
// by SetRepositories). Its methods are safe from any goroutine; everything it starts is joined
// by Run.
type Pool struct {
	cfg   PoolConfig
	slots *Slots
	log   *slog.Logger
	wg    sync.WaitGroup
	holds *holdTable // the paths the mirror keeps off, by branch (see Hold)
	// onRemoteWorks is told that a worker's push or fetch worked (see OnRemoteWorks).
	onRemoteWorks func(url string)

	mu sync.Mutex
	// ctx is the parent of everything the pool starts: nil until Run, which starts what was asked
	// for before it; cancelled when Run's context ends.
	ctx      context.Context
	closed   bool
	repos    map[string]Repository    // by Repository.Name
	workers  map[string]*poolWorker   // by WorkerKey(url, branch)
	stopping map[string]chan struct{} // workers making their last push, by key
}

type poolWorker struct {
	w        *Worker
	repo     string // the Repository whose credentials it uses
	branch   Branch
	credsKey string
	signer   Signer // the signer it was last given
	cancel   context.CancelFunc
	done     chan struct{}
	run      func(ctx context.Context) // its goroutine's body, started by launch
	launched bool
}

// NewPool creates an empty pool; workers start when SetWorkers asks for them.
func NewPool(cfg PoolConfig) *Pool {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.OnChange == nil {
		cfg.OnChange = func() {}
	}
	return &Pool{
		cfg: cfg, slots: NewSlots(cfg.MaxWorkers, cfg.MaxWorkersPerRepo), log: cfg.Log,
		holds: newHoldTable(), onRemoteWorks: func(string) {},
		repos: map[string]Repository{}, workers: map[string]*poolWorker{}, stopping: map[string]chan struct{}{},
	}
}

// Run waits until ctx ends, then stops every worker (each makes a last, bounded push), and
// returns once all of them have.
func (p *Pool) Run(ctx context.Context) error {
	p.mu.Lock()
	p.ctx = ctx
	for _, pw := range p.workers { // asked for before Run
		p.launch(pw)
	}
	p.mu.Unlock()
	<-ctx.Done()
	p.mu.Lock()
	p.closed = true
	for _, pw := range p.workers {
		pw.cancel()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return nil
}

// SetRepositories declares the repositories whose workers may run: workers of a repository no
// longer declared stop at the next SetWorkers, and workers of one whose credentials or signing
// key changed use the new ones.
func (p *Pool) SetRepositories(repos []Repository) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	clear(p.repos)
	for _, r := range repos {
		p.repos[r.Name] = r
	}
	p.updateAuth()
}

// updateAuth hands changed credentials and signing keys to the running workers of their
// repository.
func (p *Pool) updateAuth() {
	for _, pw := range p.workers {
		r, ok := p.repos[pw.repo]
		if !ok {
			continue
		}
		if r.Credentials.Key != pw.credsKey {
			pw.credsKey = r.Credentials.Key
			if pw.branch.Request != nil { // before SetAuth, whose retry then uses the new token too
				pw.w.setDelivery(p.delivery(r, pw.branch))
			}
			pw.w.SetAuth(r.Credentials.Auth)
			p.log.Info("credentials changed; the worker uses the new ones", "repo", redactURL(r.URL), "branch", pw.w.remote.Branch)
		}
		if r.Signer != pw.signer {
			pw.signer = r.Signer
			pw.w.setSigner(pw.signer)
			p.log.Info("commit signing changed; the worker signs the commits it has not pushed yet with it", "repo", redactURL(r.URL),
				"branch", pw.w.remote.Branch, "key", keyOf(pw.signer))
		}
	}
}

func keyOf(s Signer) string {
	if s == nil {
		return "none"
	}
	return s.Public().Fingerprint
}

// SetWorkers runs exactly one worker per wanted branch of a declared repository. A worker no
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
		if r, ok := p.repos[b.Repo]; ok {
			want[WorkerKey(r.URL, b.lane())] = b
		}
	}
	for k, pw := range p.workers {
		b, ok := want[k]
		if !ok || !sameRequest(b.Request, pw.branch.Request) {
			pw.cancel()
			if !pw.launched { // asked for and dropped before Run: it never opened the clone
				close(pw.done)
			}
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
	r := p.repos[b.Repo]
	pw := &poolWorker{repo: b.Repo, branch: b, credsKey: r.Credentials.Key, signer: r.Signer, cancel: func() {}, done: make(chan struct{})}
	remote := Remote{URL: r.URL, Branch: b.Branch, Auth: r.Credentials.Auth}
	var delivery Delivery
	if b.Request != nil {
		remote.Head, delivery = b.Request.Head, p.delivery(r, b)
	}
	pw.w = NewWorker(WorkerConfig{
		Remote:      remote,
		WorkDir:     p.cfg.WorkDir,
		Limits:      p.cfg.Limits,
		Identity:    p.cfg.Identity,
		Slots:       p.slots,
		Metrics:     p.cfg.Metrics,
		Log:         p.log,
		OnStatus:    func() { p.workerChanged(pw) },
		Fence:       p.fence(r.URL, b.lane()),
		Signer:      r.Signer,
		Delivery:    delivery,
		Ours:        p.cfg.Ours,
		RequestPoll: p.cfg.RequestPoll,
	})
	pw.w.holds = p.holds.forKey(r.URL, b.lane())
	previous := p.stopping[key]
	delete(p.stopping, key)
	p.workers[key] = pw
	pw.run = func(ctx context.Context) {
		defer close(pw.done)
		if previous != nil {
			<-previous // one clone, one goroutine: the old worker's last push comes first
		}
		if err := pw.w.Run(ctx); err != nil {
			p.log.Error("git worker stopped", "repo", redactURL(r.URL), "branch", b.lane(), "err", err)
		}
	}
	if p.ctx != nil {
		p.launch(pw)
	}
}

// delivery builds the Delivery of a branch's pull request; one that cannot be built fails
// every call with why, so the worker reports it and keeps the commits.
func (p *Pool) delivery(r Repository, b Branch) Delivery {
	if p.cfg.Deliveries == nil {
		return failedDelivery{errors.New("this daemon delivers no pull requests")}
	}
	d, err := p.cfg.Deliveries(r, b)
	if err != nil {
		return failedDelivery{err}
	}
	return d
}

// sameRequest reports whether two branches' requests are opened alike: a worker whose settings
// changed is stopped and started with the new ones.
func sameRequest(a, b *RequestSettings) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Head == b.Head && a.Provider == b.Provider && a.APIURL == b.APIURL && a.Draft == b.Draft &&
		slices.Equal(a.Labels, b.Labels) && a.Destination == b.Destination && a.Folder == b.Folder
}

// fence is the Fence of a worker's pushes; nil: always push.
func (p *Pool) fence(url, branch string) Fence {
	if p.cfg.Fences == nil {
		return nil
	}
	return p.cfg.Fences(url, branch)
}

// Drained is closed once the pool runs no worker for the branch: the last push of a worker
// SetWorkers stopped is done (or given up).
func (p *Pool) Drained(url, branch string) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := WorkerKey(url, branch)
	if pw := p.workers[key]; pw != nil {
		return pw.done
	}
	if done := p.stopping[key]; done != nil {
		return done
	}
	closed := make(chan struct{})
	close(closed)
	return closed
}

// launch starts a worker's goroutine. Called with p.mu held, once the pool runs.
func (p *Pool) launch(pw *poolWorker) {
	ctx, cancel := context.WithCancel(p.ctx)
	pw.cancel, pw.launched = cancel, true
	p.wg.Go(func() { pw.run(ctx) })
}

// OnRemoteWorks sets who is told, without blocking (it is called from the worker's goroutine),
// that a push or fetch to url worked: the remote answers, whatever a check of it said before.
// The one who checks the remotes is built after the pool, so it is connected here, before Run.
func (p *Pool) OnRemoteWorks(f func(url string)) { p.onRemoteWorks = f }

// workerChanged learns from a worker that started or stopped failing: a worker whose push or
// fetch works proves its remote reachable.
func (p *Pool) workerChanged(pw *poolWorker) {
	if pw.w.Status().LastError == nil {
		p.onRemoteWorks(pw.w.remote.URL)
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
		return FetchResult{}, ErrNoWorker
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
