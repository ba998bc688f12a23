// Package gitsecrets reads what the Git side needs from Kubernetes Secrets: the credentials of
// each repository's remote and the private key its commits are signed with. It follows those
// Secrets with a watch, so a fixed or rotated Secret reaches the workers within seconds, and
// hands the parsed values to the gitops.Pool, which holds no Kubernetes code. With the
// credentials in hand it also checks, in the background, that each remote answers, and says
// how each repository stands (RepoState).
package gitsecrets

import (
	"context"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/dynamic"

	"github.com/configbutler/gitops-reverser/gitops"
)

// Repository is a GitRepoConfig as it names its Secrets.
type Repository struct {
	Name      string     // namespace/name of the GitRepoConfig
	URL       string     // without credentials
	SecretRef *SecretRef // nil: the remote needs no credentials
	Signing   *Signing   // nil: commits are not signed
}

// Signing says how the commits of a repository are signed: with the private key in a Secret
// (key signingKey, and passphrase when the key is encrypted).
type Signing struct {
	Format string // gitops.SigningSSH or gitops.SigningOpenPGP
	Secret SecretRef
}

// SecretRef names a Secret.
type SecretRef struct{ Namespace, Name string }

// Pool is what takes the repositories once their Secrets are read (gitops.Pool). Its
// OnRemoteWorks should be connected to RemoteWorks.
type Pool interface {
	SetRepositories(repos []gitops.Repository)
}

// Config is what Repositories needs. Log, OnChange and SigningKeysInvalid may be nil.
type Config struct {
	Dynamic dynamic.Interface // reads and watches the Secrets
	Pool    Pool
	WorkDir string // where the known_hosts of SSH credentials are written
	// OnChange is told, without blocking, that a Secret a repository names changed (the next
	// SetRepositories reads it again) or that a check of a remote ended.
	OnChange func()
	Log      *slog.Logger
	// SigningKeysInvalid is set to the number of repositories whose signing key Secret is missing
	// or holds no usable key (metrics.Mirror.SigningKeysInvalid).
	SigningKeysInvalid prometheus.Gauge
}

// Repositories loads the credentials and signing key of every repository from its Secrets,
// hands the repositories that may push to the pool and checks that their remotes answer. Its
// methods are safe from any goroutine; the watches and checks it starts are joined by Run.
type Repositories struct {
	cfg Config
	log *slog.Logger
	wg  sync.WaitGroup

	mu sync.Mutex
	// ctx is the parent of every watch and check: nil until Run, which starts those asked for
	// before it; cancelled when Run's context ends.
	ctx     context.Context
	closed  bool
	repos   map[string]*repoEntry      // by Repository.Name
	secrets map[SecretRef]*secretWatch // one watch per referenced Secret
	reach   map[string]*reachCheck     // by URL and credentials
}

type repoEntry struct {
	repo    Repository
	creds   fromSecret[gitops.Credentials] // problem SecretInvalid when unusable
	signing fromSecret[gitops.Signer]      // nil value: commits are not signed; problem SigningKeyInvalid
}

// signingKeyInvalid is the problem of a signing key Secret that is missing or holds no usable key.
const signingKeyInvalid = "SigningKeyInvalid"

// ready reports whether workers may push: with credentials and, when asked for, a signing key.
func (e *repoEntry) ready() bool { return e.creds.usable && e.signing.usable }

// New creates Repositories; Secrets are read and watched once SetRepositories names them.
func New(cfg Config) *Repositories {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.OnChange == nil {
		cfg.OnChange = func() {}
	}
	if cfg.SigningKeysInvalid == nil {
		cfg.SigningKeysInvalid = prometheus.NewGauge(prometheus.GaugeOpts{Name: "unregistered"})
	}
	return &Repositories{
		cfg: cfg, log: cfg.Log,
		repos: map[string]*repoEntry{}, secrets: map[SecretRef]*secretWatch{}, reach: map[string]*reachCheck{},
	}
}

// Run waits until ctx ends, then stops every Secret watch and remote check and returns once
// they have.
func (r *Repositories) Run(ctx context.Context) error {
	r.mu.Lock()
	r.ctx = ctx
	for _, sw := range r.secrets { // asked for before Run
		r.startWatch(sw)
	}
	for _, rc := range r.reach {
		r.check(rc)
	}
	r.mu.Unlock()
	<-ctx.Done()
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.cfg.SigningKeysInvalid.Set(0) // a replica that no longer leads reads no Secrets
	r.wg.Wait()
	return nil
}

// SetRepositories declares the repositories: their credentials and signing keys are loaded (and
// their Secrets watched), the ones that may push are handed to the pool and their remotes
// checked in the background, and the state of each is returned by name: its remote's, unless a
// Secret has something to say.
func (r *Repositories) SetRepositories(ctx context.Context, repos []Repository) map[string]RepoState {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	wantSecrets := map[SecretRef]bool{}
	seen := map[string]bool{}
	var usable []gitops.Repository
	states := map[string]RepoState{}
	for _, spec := range repos {
		seen[spec.Name] = true
		e := r.repos[spec.Name]
		if e == nil || e.repo.URL != spec.URL || !sameRef(e.repo.SecretRef, spec.SecretRef) || !sameSigning(e.repo.Signing, spec.Signing) {
			e = &repoEntry{repo: spec}
			r.repos[spec.Name] = e
		}
		for _, ref := range e.refs() {
			wantSecrets[ref] = true
			r.watchSecret(ref)
		}
		r.loadCredentials(ctx, e)
		r.loadSigner(ctx, e)
		if e.ready() {
			repo := gitops.Repository{Name: spec.Name, URL: spec.URL, Credentials: e.creds.value, Signer: e.signing.value}
			usable = append(usable, repo)
			states[spec.Name] = r.remoteState(repo)
		}
	}
	for name := range r.repos {
		if !seen[name] {
			delete(r.repos, name)
		}
	}
	for ref, sw := range r.secrets {
		if !wantSecrets[ref] {
			sw.cancel()
			delete(r.secrets, ref)
		}
	}
	r.cfg.Pool.SetRepositories(usable)
	invalid := 0
	for _, e := range r.repos {
		if e.signing.problem == signingKeyInvalid {
			invalid++
		}
	}
	r.cfg.SigningKeysInvalid.Set(float64(invalid))
	out := make(map[string]RepoState, len(repos))
	for _, spec := range repos {
		out[spec.Name] = r.repos[spec.Name].state(states[spec.Name])
	}
	return out
}

// refs are the Secrets the repository names.
func (e *repoEntry) refs() []SecretRef {
	var out []SecretRef
	if e.repo.SecretRef != nil {
		out = append(out, *e.repo.SecretRef)
	}
	if e.repo.Signing != nil {
		out = append(out, e.repo.Signing.Secret)
	}
	return out
}

// state is the repository's state: what its Secrets say first, then its remote's (st).
func (e *repoEntry) state(st RepoState) RepoState {
	switch {
	case e.creds.problem != "" && !e.creds.usable:
		return RepoState{Reason: e.creds.problem, Message: e.creds.detail}
	case e.signing.problem != "" && !e.signing.usable:
		return RepoState{Reason: e.signing.problem, Message: e.signing.detail + "; nothing is pushed until commits can be signed"}
	case e.creds.problem != "":
		st.Reason, st.Message = e.creds.problem, e.creds.detail+"; using the credentials read before"
	case e.signing.problem != "":
		st.Reason, st.Message = e.signing.problem, e.signing.detail+"; signing with the key read before"
	}
	return st
}

func sameRef(a, b *SecretRef) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}

func sameSigning(a, b *Signing) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}
