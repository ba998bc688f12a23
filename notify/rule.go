package notify

import (
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/configbutler/gitops-reverser/crds"
)

// DefaultDuplicateWindow is how long the same notice is sent once, when a rule does not say.
const DefaultDuplicateWindow = 5 * time.Minute

// rule is a NotifyRule, compiled: what it selects and where it sends.
type rule struct {
	namespace, name string
	channel         string // the NotifyChannel's name, in namespace
	kinds           map[string][]string
	errorsOnly      bool
	destinations    []string
	namespaces      []string // whose Events it reads; [namespace] when the rule names none
	include         []*regexp.Regexp
	exclude         []*regexp.Regexp
	summary         string
	window          time.Duration
}

// compile checks and compiles r; the error says which field is wrong (the rule's Ready reason
// InvalidRegexp).
func compile(r *crds.NotifyRule) (*rule, error) {
	c := &rule{
		namespace: r.Namespace, name: r.Name, channel: r.Spec.ChannelRef.Name,
		errorsOnly:   r.Spec.Severity == crds.SeverityError,
		destinations: r.Spec.Destinations, namespaces: r.Spec.Namespaces,
		summary: r.Spec.Summary, window: DefaultDuplicateWindow,
	}
	if len(c.namespaces) == 0 {
		c.namespaces = []string{r.Namespace}
	}
	if r.Spec.DuplicateWindow != nil && r.Spec.DuplicateWindow.Duration > 0 {
		c.window = r.Spec.DuplicateWindow.Duration
	}
	if len(r.Spec.Events) > 0 {
		c.kinds = map[string][]string{}
		for _, e := range r.Spec.Events {
			c.kinds[e.Kind] = append(c.kinds[e.Kind], e.Reasons...)
			if len(e.Reasons) == 0 {
				c.kinds[e.Kind] = nil // every reason, whatever another selector of the kind says
			}
		}
	}
	var err error
	if c.include, err = regexps("spec.include", r.Spec.Include); err != nil {
		return nil, err
	}
	if c.exclude, err = regexps("spec.exclude", r.Spec.Exclude); err != nil {
		return nil, err
	}
	return c, nil
}

func regexps(field string, exprs []string) ([]*regexp.Regexp, error) {
	out := make([]*regexp.Regexp, 0, len(exprs))
	for i, e := range exprs {
		re, err := regexp.Compile(e)
		if err != nil {
			return nil, fmt.Errorf("%s[%d] %q is not a regular expression: %w", field, i, e, err)
		}
		out = append(out, re)
	}
	return out, nil
}

// selects says whether the rule wants n by what the Event says (kind, reason, severity, message),
// before anything is looked up: cheap, run for every rule and Event.
func (r *rule) selects(n *Notice) bool {
	if r.errorsOnly && n.Severity != SeverityError {
		return false
	}
	if r.kinds != nil {
		reasons, ok := r.kinds[n.Object.Kind]
		if !ok || reasons != nil && !slices.Contains(reasons, n.Reason) {
			return false
		}
	}
	if !slices.Contains(r.namespaces, n.scope) {
		return false
	}
	if len(r.include) > 0 && !slices.ContainsFunc(r.include, func(re *regexp.Regexp) bool { return re.MatchString(n.Message) }) {
		return false
	}
	return !slices.ContainsFunc(r.exclude, func(re *regexp.Regexp) bool { return re.MatchString(n.Message) })
}

// Consent says whether the GitDestination namespace/name admits namespace from (its
// spec.accessPolicy), as a reference from that namespace would be admitted.
type Consent func(namespace, name, from string) bool

// sees says whether the rule may read n, once n says which destination it concerns: its own
// namespace's notices, and another namespace's only with that destination's consent. A notice of
// another namespace that concerns no destination is never read; nor is one of a cluster-scoped
// object, which only the daemon's own namespace reads.
func (r *rule) sees(n *Notice, consent Consent) bool {
	if len(r.destinations) > 0 && !slices.Contains(r.destinations, n.Destination) {
		return false
	}
	if n.scope == r.namespace {
		return true
	}
	return n.Destination != "" && n.Object.Namespace != "" && consent != nil && consent(n.Object.Namespace, n.Destination, r.namespace)
}
