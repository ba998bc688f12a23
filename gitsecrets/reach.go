package gitsecrets

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/configbutler/gitops-reverser/gitops"
)

// RepoState is how a repository stands: its Secrets, then its remote.
type RepoState struct {
	// Usable: credentials are loaded (or none are needed), so workers may run.
	Usable bool
	// Checked: the remote was contacted with these credentials; Reachable says how it went.
	Checked, Reachable bool
	// Reason and Message explain the state: what is wrong with a Secret (SecretInvalid...), else
	// Unreachable, Reachable, or Checking while the first contact is under way.
	Reason, Message string
	// SigningKey is the key commits are signed with; nil when they are not signed.
	SigningKey *gitops.SigningKey
}

// reachTimeout bounds one reachability check.
const reachTimeout = 15 * time.Second

// reachCheck is the result of listing a remote's references, done once it is known.
type reachCheck struct {
	url   string
	creds gitops.Credentials
	done  bool
	err   error
}

// remoteState is the state of a repository the pool may run workers for, starting a check of
// its remote when none is known. Called with r.mu held.
func (r *Repositories) remoteState(repo gitops.Repository) RepoState {
	rc := r.reachability(repo.URL, repo.Credentials)
	s := RepoState{Usable: true, Checked: rc.done, Reachable: rc.done && rc.err == nil}
	if repo.Signer != nil {
		key := repo.Signer.Public()
		s.SigningKey = &key
	}
	switch {
	case !rc.done:
		s.Reason, s.Message = "Checking", "contacting "+repo.URL
	case rc.err != nil:
		s.Reason, s.Message = "Unreachable", "cannot list "+repo.URL+": "+rc.err.Error()
	default:
		s.Reason, s.Message = "Reachable", "remote "+repo.URL+" answers"
	}
	return s
}

// reachability returns what is known of url with creds, starting a check in the background when
// nothing is: a dead remote never holds up the caller. Called with r.mu held.
func (r *Repositories) reachability(url string, creds gitops.Credentials) *reachCheck {
	k := url + "\x00" + creds.Key
	if rc := r.reach[k]; rc != nil {
		return rc
	}
	rc := &reachCheck{url: url, creds: creds}
	r.reach[k] = rc
	if r.ctx != nil {
		r.check(rc)
	}
	return rc
}

// check lists the remote of rc in the background. Called with r.mu held, once Run has begun.
func (r *Repositories) check(rc *reachCheck) {
	ctx := r.ctx
	r.wg.Go(func() {
		err := listRemote(ctx, rc.url, rc.creds.Auth)
		if ctx.Err() != nil {
			return
		}
		r.mu.Lock()
		rc.done, rc.err = true, err
		r.mu.Unlock()
		r.cfg.OnChange()
	})
}

// Recheck forgets what is known of the remotes, so the next SetRepositories contacts them again.
func (r *Repositories) Recheck() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.reach)
}

// RemoteWorks learns that a push or fetch to url just worked (gitops.PoolConfig.OnRemoteWorks):
// the remote answers, whatever an earlier check said.
func (r *Repositories) RemoteWorks(url string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, rc := range r.reach {
		if strings.HasPrefix(k, url+"\x00") {
			rc.done, rc.err = true, nil
		}
	}
}

// listRemote lists the remote's references; an empty repository is a fine place to start.
func listRemote(ctx context.Context, url string, auth transport.AuthMethod) error {
	ctx, cancel := context.WithTimeout(ctx, reachTimeout)
	defer cancel()
	remote := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "origin", URLs: []string{url}})
	_, err := remote.ListContext(ctx, &git.ListOptions{Auth: auth})
	if errors.Is(err, transport.ErrEmptyRemoteRepository) {
		return nil
	}
	return err
}
