package notify_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/configbutler/gitops-reverser/notify"
)

// teamsBody is what a Teams workflow reads: a message with an Adaptive Card attachment.
type teamsBody struct {
	Type        string `json:"type"`
	Attachments []struct {
		ContentType string          `json:"contentType"`
		ContentURL  json.RawMessage `json:"contentUrl"`
		Content     struct {
			Schema  string        `json:"$schema"`
			Type    string        `json:"type"`
			Version string        `json:"version"`
			Body    []cardElement `json:"body"`
			Actions []struct {
				Type, Title, URL string
			} `json:"actions"`
		} `json:"content"`
	} `json:"attachments"`
}

type cardElement struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Weight   string `json:"weight"`
	Size     string `json:"size"`
	FontType string `json:"fontType"`
	Wrap     bool   `json:"wrap"`
	Facts    []struct{ Title, Value string }
	Inlines  []cardElement `json:"inlines"`
}

// MustSendToTeams sends n to a loopback Teams workflow and decodes what it received, checking
// the envelope and the card's header.
func MustSendToTeams(t *testing.T, n notify.Notice) teamsBody {
	t.Helper()
	srv, got := MustChannel(t, http.StatusAccepted, "")
	if err := notify.NewTeams(srv.URL+secretPath, srv.Client()).Send(t.Context(), n); err != nil {
		t.Fatalf("Send = %v", err)
	}
	req := MustReceive(t, got)
	var b teamsBody
	if err := json.Unmarshal(req.body, &b); err != nil {
		t.Fatalf("the body is not JSON: %v", err)
	}
	if b.Type != "message" || len(b.Attachments) != 1 {
		t.Fatalf("type %q with %d attachments, want a message with one", b.Type, len(b.Attachments))
	}
	a := b.Attachments[0]
	if a.ContentType != "application/vnd.microsoft.card.adaptive" || string(a.ContentURL) != "null" {
		t.Errorf("attachment contentType %q contentUrl %s", a.ContentType, a.ContentURL)
	}
	c := a.Content
	if c.Schema != "http://adaptivecards.io/schemas/adaptive-card.json" || c.Type != "AdaptiveCard" || c.Version != "1.4" {
		t.Errorf("card $schema %q type %q version %q", c.Schema, c.Type, c.Version)
	}
	if len(c.Body) == 0 {
		t.Fatal("the card has no body")
	}
	if title := c.Body[0]; title.Type != "TextBlock" || title.Weight != "Bolder" || title.Size != "Medium" ||
		!title.Wrap || title.Text != n.Title() {
		t.Errorf("the card does not lead with the title: %+v", title)
	}
	return b
}

func TestTeamsCard(t *testing.T) {
	bare := notify.Notice{Severity: notify.SeverityError, Reason: "NotReady",
		Object: notify.Ref{Kind: "GitDestination", Namespace: "team-a", Name: "prod"}}

	cases := []struct {
		name  string
		n     notify.Notice
		check func(t *testing.T, b teamsBody)
	}{
		{"shows the message, the fields, the diff as it is, and a button to the link", sampleNotice(), func(t *testing.T, b teamsBody) {
			c := b.Attachments[0].Content
			var types []string
			for _, e := range c.Body {
				types = append(types, e.Type)
			}
			if got := strings.Join(types, ","); got != "TextBlock,TextBlock,FactSet,RichTextBlock" {
				t.Fatalf("body %s, want title, message, facts and diff", got)
			}
			if m := c.Body[1]; m.Text != sampleNotice().Message || !m.Wrap {
				t.Errorf("message block %+v", m)
			}
			facts := map[string]string{}
			for _, f := range c.Body[2].Facts {
				facts[f.Title] = f.Value
			}
			want := map[string]string{"Object": "Proposal team-a/web-3f2a9c", "Destination": "prod",
				"Commit": "0123456789ab", "Author": "Jane Doe <jane@example.com>", "File": "apps/web/deployment.yaml"}
			for k, v := range want {
				if facts[k] != v {
					t.Errorf("fact %s = %q, want %q", k, facts[k], v)
				}
			}
			if runs := c.Body[3].Inlines; len(runs) != 1 || runs[0].Type != "TextRun" ||
				!strings.EqualFold(runs[0].FontType, "monospace") || runs[0].Text != sampleNotice().Diff {
				t.Errorf("the diff is not one monospace TextRun of the diff as it is: %+v", runs)
			}
			if len(c.Actions) != 1 || c.Actions[0].Type != "Action.OpenUrl" || c.Actions[0].URL != sampleNotice().Link {
				t.Errorf("actions %+v, want one Action.OpenUrl to the link", c.Actions)
			}
		}},
		{"leaves out what is not set", bare, func(t *testing.T, b teamsBody) {
			c := b.Attachments[0].Content
			if len(c.Body) != 2 || c.Body[1].Type != "FactSet" || len(c.Body[1].Facts) != 1 {
				t.Errorf("body %+v, want the title and the object's fact only", c.Body)
			}
			if len(c.Actions) != 0 {
				t.Errorf("actions %+v without a link", c.Actions)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.check(t, MustSendToTeams(t, tc.n))
		})
	}
}
