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

// errRemoteMoved means the branch is no longer where our commits start: fetch and replay.
var errRemoteMoved = errors.New("remote branch moved")

// sendPack pushes pack and moves the branch from old to tip through a receive-pack session.
// Only the objects we created are sent, so the cost does not grow with the repository. The
// update is refused before anything is sent when the advertised tip is not old; a fast-forward
// is guaranteed by construction because tip descends from old.
func (r *repo) sendPack(ctx context.Context, old, tip plumbing.Hash, pack []byte) (err error) {
	ep, err := transport.NewEndpoint(r.url)
	if err != nil {
		return fmt.Errorf("parse remote url: %w", err)
	}
	cl, err := client.NewClient(ep)
	if err != nil {
		return fmt.Errorf("remote client: %w", err)
	}
	sess, err := cl.NewReceivePackSession(ep, r.auth)
	if err != nil {
		return fmt.Errorf("open receive-pack session: %w", err)
	}
	defer func() {
		if cerr := sess.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close receive-pack session: %w", cerr)
		}
	}()
	ar, err := sess.AdvertisedReferencesContext(ctx)
	if err != nil && !errors.Is(err, transport.ErrEmptyRemoteRepository) {
		return fmt.Errorf("list remote refs: %w", err)
	}
	var advertised plumbing.Hash
	if ar != nil {
		advertised = ar.References[r.branch.String()]
	}
	if advertised != old {
		return fmt.Errorf("%w: remote %s is at %s, our commits start at %s", errRemoteMoved, r.branch, advertised, old)
	}
	req := packp.NewReferenceUpdateRequest()
	if ar != nil {
		req = packp.NewReferenceUpdateRequestFromCapabilities(ar.Capabilities)
	} else {
		_ = req.Capabilities.Set(capability.ReportStatus) // git has always supported it
	}
	req.Commands = []*packp.Command{{Name: r.branch, Old: old, New: tip}}
	req.Packfile = io.NopCloser(bytes.NewReader(pack))
	report, err := sess.ReceivePack(ctx, req)
	if report == nil {
		if err == nil {
			err = errors.New("no report status")
		}
		return fmt.Errorf("send pack: %w", err)
	}
	if report.UnpackStatus != "ok" {
		return fmt.Errorf("send pack: remote could not unpack: %s", report.UnpackStatus)
	}
	for _, cs := range report.CommandStatuses {
		if cs.Status != "ok" {
			// Another push won the race for the ref lock, or a rule refused the update: both
			// are resolved by fetching and replaying on the new tip.
			return fmt.Errorf("%w: %s rejected: %s", errRemoteMoved, cs.ReferenceName, cs.Status)
		}
	}
	return nil
}
