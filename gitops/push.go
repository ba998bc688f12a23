package gitops

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
)

// pusher moves the references of one remote: what the worker's pushes learned of it.
type pusher struct {
	url          string
	auth         transport.AuthMethod
	branch, head plumbing.ReferenceName // refs/heads/{Remote.Branch}, and {Remote.Head} when set
	caps         *capability.List       // receive-pack capabilities, once advertised
	thinFailures int                    // thin packs in a row the remote failed to unpack
}

func newPusher(r Remote) pusher {
	p := pusher{url: r.URL, auth: r.Auth, branch: plumbing.NewBranchReferenceName(r.Branch)}
	if r.Head != "" {
		p.head = plumbing.NewBranchReferenceName(r.Head)
	}
	return p
}

// setAuth replaces the credentials of later pushes.
func (p *pusher) setAuth(auth transport.AuthMethod) {
	p.auth = auth
	p.caps = nil
}

// errRemoteMoved means the branch is no longer where our commits start: fetch and replay.
var errRemoteMoved = errors.New("remote branch moved")

// noThin is the capability of a remote that cannot complete thin packs (go-git has no name for it).
const noThin capability.Capability = "no-thin"

// packFunc encodes the pack of a push, thin (holding deltas against objects the remote has) or
// not.
type packFunc func(thin bool) ([]byte, error)

// updateRef moves the remote reference ref from old to tip (zero: delete it) through a
// receive-pack session, sending the pack encode makes (nil: none). Only the objects we created
// are sent, so the cost does not grow with the repository; the pack is thin unless the remote
// says no-thin or failed to complete thin ones before. A thin pack the remote fails to unpack is
// sent again whole. The remote applies it only while ref is still at old, which we report as
// errRemoteMoved otherwise: a compare and swap. tip descends from old by construction, so an
// accepted update is a fast-forward, but for a rebuilt head branch, which overwrites nothing it
// did not see.
func (p *pusher) updateRef(ctx context.Context, ref plumbing.ReferenceName, old, tip plumbing.Hash, encode packFunc) error {
	thin := p.thinFailures < maxThinFailures
	err := p.sendPack(ctx, ref, old, tip, encode, &thin)
	var unpack *unpackError
	switch {
	case thin && errors.As(err, &unpack):
		// A remote that lacks a base (its history was rewritten), or that refuses thin packs
		// without saying so: this push goes whole, and every later one after the second time.
		p.thinFailures++
		thin = false
		err = p.sendPack(ctx, ref, old, tip, encode, &thin)
	case thin && err == nil:
		p.thinFailures = 0
	}
	return err
}

// maxThinFailures is how many thin packs in a row a remote fails to unpack before it is sent
// whole ones only.
const maxThinFailures = 2

// unpackError is a remote's failure to take in a pack.
type unpackError struct{ status string }

func (e *unpackError) Error() string { return "send pack: remote could not unpack: " + e.status }

// sendPack is one receive-pack session of updateRef. *thin says whether to send a thin pack,
// and comes back false when the remote's capabilities say not to.
func (p *pusher) sendPack(ctx context.Context, ref plumbing.ReferenceName, old, tip plumbing.Hash, encode packFunc, thin *bool) (err error) {
	ep, err := transport.NewEndpoint(p.url)
	if err != nil {
		return fmt.Errorf("parse remote url: %w", err)
	}
	cl, err := client.NewClient(ep)
	if err != nil {
		return fmt.Errorf("remote client: %w", err)
	}
	sess, err := cl.NewReceivePackSession(ep, p.auth)
	if err != nil {
		return fmt.Errorf("open receive-pack session: %w", err)
	}
	defer func() {
		if cerr := sess.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close receive-pack session: %w", cerr)
		}
	}()
	caps, err := p.pushCapabilities(ctx, sess, ep, ref, old)
	if err != nil {
		return err
	}
	req := packp.NewReferenceUpdateRequestFromCapabilities(caps)
	req.Commands = []*packp.Command{{Name: ref, Old: old, New: tip}}
	if encode != nil {
		*thin = *thin && !caps.Supports(noThin)
		pack, err := encode(*thin)
		if err != nil {
			return err
		}
		req.Packfile = io.NopCloser(bytes.NewReader(pack))
	}
	report, err := sess.ReceivePack(ctx, req)
	if report == nil {
		p.caps = nil // look again next time
		if err == nil {
			err = errors.New("no report status")
		}
		return fmt.Errorf("send pack: %w", err)
	}
	if report.UnpackStatus != "ok" {
		return &unpackError{status: report.UnpackStatus}
	}
	for _, cs := range report.CommandStatuses {
		if cs.Status != "ok" {
			// Another push won the race for the ref, or a rule refused the update: both are
			// resolved by fetching and replaying on the new tip.
			return fmt.Errorf("%w: %s rejected: %s", errRemoteMoved, cs.ReferenceName, cs.Status)
		}
	}
	return nil
}

// pushCapabilities returns the remote's receive-pack capabilities. Over HTTP every request
// stands alone, so once they are known the ref advertisement (one round trip and one server
// process) is skipped: the remote still refuses the update if the branch is not at old.
// Otherwise the advertisement is read and a moved branch is reported before sending anything.
func (p *pusher) pushCapabilities(ctx context.Context, sess transport.ReceivePackSession,
	ep *transport.Endpoint, ref plumbing.ReferenceName, old plumbing.Hash) (*capability.List, error) {
	stateless := ep.Protocol == "http" || ep.Protocol == "https"
	if stateless && p.caps != nil {
		return p.caps, nil
	}
	ar, err := sess.AdvertisedReferencesContext(ctx)
	if err != nil && !errors.Is(err, transport.ErrEmptyRemoteRepository) {
		return nil, fmt.Errorf("list remote refs: %w", err)
	}
	caps := capability.NewList()
	var advertised plumbing.Hash
	if ar != nil {
		caps, advertised = ar.Capabilities, ar.References[ref.String()]
	} else {
		_ = caps.Set(capability.ReportStatus) // an empty remote over HTTP: git always has it
	}
	p.caps = caps
	if advertised != old {
		return nil, fmt.Errorf("%w: remote %s is at %s, our commits start at %s", errRemoteMoved, ref, advertised, old)
	}
	return caps, nil
}
