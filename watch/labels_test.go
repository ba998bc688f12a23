package watch

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

func mustScope(t *testing.T, objects, namespaces *metav1.LabelSelector) labelScope {
	t.Helper()
	s, err := scopeOf(objects, namespaces)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestLabelScopes: rules on one resource unite what they select; only one selector on object
// labels, the same for every target, is left to the apiserver.
func TestLabelScopes(t *testing.T) {
	app := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "shop"}}
	tier := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"web"}}}}
	team := &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
	byApp := filterOf(ruleSpec{}.ResourceRule, mustScope(t, app, nil))
	byTier := filterOf(ruleSpec{}.ResourceRule, mustScope(t, tier, nil))
	byTeam := filterOf(ruleSpec{}.ResourceRule, mustScope(t, nil, team))
	everything := filterOf(ruleSpec{}.ResourceRule, mustScope(t, &metav1.LabelSelector{}, nil))

	if everything.scopes != nil {
		t.Errorf("an empty selector selects everything, got scopes %v", everything.scopes)
	}
	if got := byApp.and(everything).scopes; got != nil {
		t.Errorf("a rule without selector beside one with: %v, want everything", got)
	}
	both := byApp.and(byTier)
	for _, c := range []struct {
		obj, ns labels.Set
		want    bool
	}{
		{labels.Set{"app": "shop"}, nil, true},
		{labels.Set{"tier": "web"}, nil, true},
		{labels.Set{"app": "other", "tier": "db"}, nil, false},
		{nil, nil, false},
	} {
		if got := both.scopes.selects(c.obj, c.ns); got != c.want {
			t.Errorf("app=shop or tier=web selects %v: %v, want %v", c.obj, got, c.want)
		}
	}
	if byTeam.scopes.selects(labels.Set{"app": "shop"}, labels.Set{"team": "b"}) || !byTeam.scopes.selects(nil, labels.Set{"team": "a"}) {
		t.Error("a namespaceSelector goes by the namespace's labels")
	}

	for _, c := range []struct {
		name    string
		targets []filter
		want    string
	}{
		{"one selector", []filter{byApp}, "app=shop"},
		{"the same for two destinations", []filter{byApp, byApp}, "app=shop"},
		{"two selectors", []filter{byApp, byTier}, ""},
		{"one destination with two rules", []filter{both}, ""},
		{"a destination selecting everything", []filter{byApp, everything}, ""},
		{"a namespaceSelector", []filter{byTeam}, ""},
	} {
		targets := make([]target, len(c.targets))
		for i, f := range c.targets {
			targets[i].filter = f
		}
		if got := serverSide(targets); got != c.want {
			t.Errorf("%s: the apiserver applies %q, want %q", c.name, got, c.want)
		}
	}
}

// FuzzSelectorParsing: whatever selector slips past the apiserver's schema, the daemon parses it
// into a scope or an error, and matching with it never panics.
func FuzzSelectorParsing(f *testing.F) {
	f.Add("app", "In", "shop", "team", "a")
	f.Add("", "Exists", "", "", "")
	f.Add("not a key!", "Like", "-x-", "a/b/c", "??")
	f.Add("example.com/app", "NotIn", "", "k", string(make([]byte, 70)))
	f.Fuzz(func(t *testing.T, key, op, value, labelKey, labelValue string) {
		req := metav1.LabelSelectorRequirement{Key: key, Operator: metav1.LabelSelectorOperator(op)}
		if value != "" {
			req.Values = []string{value}
		}
		sel := &metav1.LabelSelector{MatchLabels: map[string]string{labelKey: labelValue}, MatchExpressions: []metav1.LabelSelectorRequirement{req}}
		scope, err := scopeOf(sel, sel)
		if err != nil {
			return
		}
		_ = labelScopes{scope}.selects(labels.Set{key: value}, labels.Set{labelKey: labelValue})
		_ = scope.String()
	})
}
