package pullrequest

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/configbutler/gitops-reverser/gitops"
	"github.com/configbutler/gitops-reverser/layout"
)

// Delivery keeps the one request of a Git worker's head branch on a Host: it implements
// gitops.Delivery. It remembers the request it last saw, so a head that says nothing new costs
// no call, and a head that does costs one write (an update, or an open after a find).
type Delivery struct {
	host     Host
	settings gitops.RequestSettings

	mu   sync.Mutex // the worker calls one at a time; the lock only keeps the race detector calm
	last *Request   // as the host last answered, nil until one is known
}

// NewDelivery delivers through host, opening requests as settings say.
func NewDelivery(host Host, settings gitops.RequestSettings) *Delivery {
	return &Delivery{host: host, settings: settings}
}

// Deliver opens the request for head, or has the open one describe it. A request someone
// closed or merged meanwhile is left as it is, and another one is opened.
func (d *Delivery) Deliver(ctx context.Context, head gitops.Head) (gitops.Request, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	title, body := Describe(d.summary(head))
	for {
		if d.last == nil || d.last.State != StateOpen {
			found, err := d.host.Find(ctx, head.Branch, head.Target)
			if err != nil {
				return gitops.Request{}, err
			}
			d.last = found
		}
		if d.last == nil {
			opened, err := d.host.Open(ctx, NewRequest{Head: head.Branch, Base: head.Target, Title: title, Body: body,
				Labels: d.settings.Labels, Draft: d.settings.Draft})
			if err != nil {
				return gitops.Request{}, err
			}
			d.last = opened
			return d.answer("opened"), nil
		}
		if d.last.Body == body && sameTitle(d.last, title) {
			return d.answer(""), nil
		}
		updated, err := d.host.Update(ctx, d.last.Number, title, body)
		if err != nil {
			return gitops.Request{}, d.forget(err)
		}
		if d.last = updated; updated.State == StateOpen {
			return d.answer("updated"), nil
		}
	}
}

// Withdraw closes the open request, if any: the head branch was deleted.
func (d *Delivery) Withdraw(ctx context.Context, head gitops.Head) (gitops.Request, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.last == nil || d.last.State == StateOpen {
		found, err := d.host.Find(ctx, head.Branch, head.Target)
		if err != nil {
			return gitops.Request{}, err
		}
		if found == nil && d.last != nil { // not open any more: merged or closed by someone
			found, err = d.host.Get(ctx, d.last.Number)
			if err != nil {
				return gitops.Request{}, d.forget(err)
			}
		}
		d.last = found
	}
	if d.last == nil || d.last.State != StateOpen {
		return d.answer(""), nil
	}
	if err := d.host.Close(ctx, d.last.Number); err != nil {
		return gitops.Request{}, d.forget(err)
	}
	d.last.State = StateClosed
	return d.answer("closed"), nil
}

// Check returns the request as the host has it now.
func (d *Delivery) Check(ctx context.Context, head gitops.Head) (gitops.Request, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var err error
	var now *Request
	if d.last != nil {
		now, err = d.host.Get(ctx, d.last.Number)
	} else {
		now, err = d.host.Find(ctx, head.Branch, head.Target)
	}
	if err != nil {
		return gitops.Request{}, d.forget(err)
	}
	d.last = now
	return d.answer(""), nil
}

// forget drops the request last seen when the host says it is gone (deleted there): the next
// call looks for the open one again instead of asking for the missing one forever.
func (d *Delivery) forget(err error) error {
	var e *Error
	if errors.As(err, &e) && e.Reason == ReasonRequestNotFound {
		d.last = nil
	}
	return err
}

// answer is the last request as gitops knows it, zero when there is none.
func (d *Delivery) answer(event string) gitops.Request {
	if d.last == nil {
		return gitops.Request{}
	}
	r := d.last
	answer := gitops.Request{Number: r.Number, URL: r.URL, State: r.State, HeadCommit: r.HeadCommit, OpenedAt: r.OpenedAt, Event: event}
	if event == "opened" {
		answer.Warnings = r.Warnings // Open's, told once
	}
	return answer
}

// sameTitle reports whether the request's title is title, a draft prefix aside.
func sameTitle(r *Request, title string) bool {
	return r.Title == title || r.Title == "WIP: "+title || r.Title == "Draft: "+title
}

// summary adds up what head holds, for Describe: changes by kind and operation, from the files'
// paths, and the authors of its commits.
func (d *Delivery) summary(head gitops.Head) Summary {
	s := Summary{Destination: d.settings.Destination, Target: head.Target, Head: head.Branch, Folder: d.settings.Folder,
		Changes: map[Change]int{}, Commits: len(head.Commits)}
	for _, f := range head.Files {
		kind := "other files"
		if o, err := layout.ParsePath(d.settings.Folder, f.Path); err == nil && o.Resource != "" {
			kind = o.Resource
			if o.Group != "" {
				kind += "." + o.Group
			}
		}
		op := ChangeUpdate
		switch {
		case f.Deleted:
			op = ChangeDelete
		case f.Added:
			op = ChangeCreate
		}
		s.Changes[Change{Kind: kind, Op: op}]++
	}
	seen := map[string]bool{}
	for _, c := range head.Commits {
		who := fmt.Sprintf("%s <%s>", c.Author.Name, c.Author.Email)
		if !seen[who] {
			seen[who] = true
			s.Authors = append(s.Authors, who)
		}
		if s.Oldest.IsZero() || c.When.Before(s.Oldest) {
			s.Oldest = c.When
		}
	}
	return s
}
