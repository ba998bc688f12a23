package gitops

import (
	"context"
	"errors"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/memory"
)

// reachTimeout bounds one reachability check.
const reachTimeout = 15 * time.Second

// reachCheck is the result of listing a remote's references, done once it is known.
type reachCheck struct {
	url   string
	creds Credentials
	done  bool
	err   error
}

// reachability returns what is known of url with creds, starting a check in the background when
// nothing is: a dead remote never holds up the caller. Called with p.mu held.
func (p *Pool) reachability(url string, creds Credentials) *reachCheck {
	k := url + "\x00" + creds.Key
	if rc := p.reach[k]; rc != nil {
		return rc
	}
	rc := &reachCheck{url: url, creds: creds}
	p.reach[k] = rc
	if p.ctx != nil {
		p.check(rc)
	}
	return rc
}

// check lists the remote of rc in the background. Called with p.mu held, once the pool runs.
func (p *Pool) check(rc *reachCheck) {
	ctx := p.ctx
	p.wg.Go(func() {
		err := listRemote(ctx, rc.url, rc.creds.Auth)
		if ctx.Err() != nil {
			return
		}
		p.mu.Lock()
		rc.done, rc.err = true, err
		p.mu.Unlock()
		p.cfg.OnChange()
	})
}

// Recheck forgets what is known of the remotes, so the next SetRepositories contacts them again.
func (p *Pool) Recheck() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.reach)
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
