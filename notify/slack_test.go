package notify_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/configbutler/gitops-reverser/notify"
)

// slackBody is what a Slack incoming webhook reads.
type slackBody struct {
	Text   *string `json:"text"`
	Blocks []struct {
		Type     string      `json:"type"`
		Text     *slackText  `json:"text"`
		Fields   []slackText `json:"fields"`
		Elements []slackText `json:"elements"`
	} `json:"blocks"`
}

type slackText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// MustSendToSlack sends n to a loopback Slack webhook and decodes what it received, checking
// Slack's rules on every block.
func MustSendToSlack(t *testing.T, n notify.Notice) slackBody {
	t.Helper()
	srv, got := MustChannel(t, http.StatusOK, "ok")
	if err := notify.NewSlack(srv.URL+secretPath, srv.Client()).Send(t.Context(), n); err != nil {
		t.Fatalf("Send = %v", err)
	}
	req := MustReceive(t, got)
	if ct := req.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	var body slackBody
	if err := json.Unmarshal(req.body, &body); err != nil {
		t.Fatalf("the body is not JSON: %v", err)
	}
	if body.Text == nil || *body.Text == "" {
		t.Error("no fallback text")
	}
	if len(body.Blocks) == 0 || len(body.Blocks) > 50 {
		t.Fatalf("%d blocks, want 1 to 50", len(body.Blocks))
	}
	for i, b := range body.Blocks {
		checkSlackBlock(t, i, b.Type, b.Text, b.Fields, b.Elements)
	}
	return body
}

// checkSlackBlock checks one block against Slack's limits for its type.
func checkSlackBlock(t *testing.T, i int, typ string, text *slackText, fields, elements []slackText) {
	t.Helper()
	atMost := func(what string, s slackText, limit int, textType string) {
		if n := utf8.RuneCountInString(s.Text); n == 0 || n > limit {
			t.Errorf("block %d (%s): %s has %d characters, want 1 to %d", i, typ, what, n, limit)
		}
		if textType != "" && s.Type != textType {
			t.Errorf("block %d (%s): %s is %q, want %q", i, typ, what, s.Type, textType)
		}
	}
	switch typ {
	case "header":
		if text == nil {
			t.Fatalf("block %d: a header without text", i)
		}
		atMost("text", *text, 150, "plain_text")
	case "section":
		if text == nil && len(fields) == 0 {
			t.Errorf("block %d: a section with neither text nor fields", i)
		}
		if text != nil {
			atMost("text", *text, 3000, "")
		}
		if len(fields) > 10 {
			t.Errorf("block %d: %d fields, want at most 10", i, len(fields))
		}
		for _, f := range fields {
			atMost("a field", f, 2000, "")
		}
	case "context":
		if len(elements) == 0 || len(elements) > 10 {
			t.Errorf("block %d: %d elements, want 1 to 10", i, len(elements))
		}
		for _, e := range elements {
			atMost("an element", e, 3000, "mrkdwn")
		}
	default:
		t.Errorf("block %d is of type %q, not one this channel sends", i, typ)
	}
}

// slackTexts is every text of a message, block by block.
func slackTexts(b slackBody) []string {
	var out []string
	for _, bl := range b.Blocks {
		if bl.Text != nil {
			out = append(out, bl.Text.Text)
		}
		for _, f := range append(bl.Fields, bl.Elements...) {
			out = append(out, f.Text)
		}
	}
	return out
}

func TestSlackMessage(t *testing.T) {
	long := sampleNotice()
	long.Summary = strings.Repeat("s", 200)
	long.Message = strings.Repeat("m", 10000)
	long.Diff = strings.Repeat("<", 5000) // each escapes to four characters
	long.File = strings.Repeat("f/", 1500)

	bare := notify.Notice{Severity: notify.SeverityError, Reason: "PushFailing",
		Object: notify.Ref{Kind: "GitDestination", Namespace: "team-a", Name: "prod"}}

	cases := []struct {
		name  string
		n     notify.Notice
		check func(t *testing.T, texts []string, b slackBody)
	}{
		{"shows every field that is set, with the link", sampleNotice(), func(t *testing.T, texts []string, b slackBody) {
			all := strings.Join(texts, "\n")
			for _, want := range []string{
				"production: Opened Proposal team-a/web-3f2a9c", // the title
				"*Object*\nProposal team-a/web-3f2a9c",
				"*Destination*\nprod",
				"*Commit*\n0123456789ab",
				"*Author*\nJane Doe &lt;jane@example.com&gt;",
				"*File*\napps/web/deployment.yaml",
				"```\n- replicas: 2\n+ replicas: 3\n* image: &lt;same&gt;\n```",
				"<https://ops.example/proposals/team-a/web-3f2a9c?tab=diff&amp;line=1|",
			} {
				if !strings.Contains(all, want) {
					t.Errorf("the message lacks %q:\n%s", want, all)
				}
			}
			if strings.Contains(all, "0123456789abc") {
				t.Error("the commit is not shortened")
			}
		}},
		{"escapes what mrkdwn reserves, so a message cannot mention @channel", sampleNotice(), func(t *testing.T, texts []string, b slackBody) {
			want := "spec.replicas 2 → 3 &lt;!channel&gt; &amp; more"
			if !strings.Contains(strings.Join(texts, "\n"), want) {
				t.Errorf("no block holds %q: %q", want, texts)
			}
			if *b.Text != "production: Opened Proposal team-a/web-3f2a9c" {
				t.Errorf("fallback text %q", *b.Text)
			}
		}},
		{"cuts long texts to Slack's limits", long, func(t *testing.T, texts []string, b slackBody) {
			// The limits are checked for every message; here they are reached, and the cut shows.
			cut := 0
			for _, s := range texts {
				if strings.Contains(s, "…") {
					cut++
				}
				if inner, ok := strings.CutPrefix(s, "```\n"); ok {
					inner = strings.TrimSuffix(inner, "…\n```")
					if strings.ReplaceAll(inner, "&lt;", "") != "" {
						t.Errorf("the diff is cut inside an escape: …%s", s[len(s)-20:])
					}
				}
			}
			if cut < 3 { // the message, the diff and the file
				t.Errorf("%d texts end with …, want at least 3", cut)
			}
			if h := b.Blocks[0].Text.Text; !strings.HasSuffix(h, "…") {
				t.Errorf("the header is not cut: %q", h)
			}
		}},
		{"leaves out what is not set", bare, func(t *testing.T, texts []string, b slackBody) {
			var types []string
			for _, bl := range b.Blocks {
				types = append(types, bl.Type)
			}
			if got := strings.Join(types, ","); got != "header,section" {
				t.Errorf("blocks %s, want header,section (the title and the object only)", got)
			}
			if len(b.Blocks[1].Fields) != 1 {
				t.Errorf("%d fields, want only the object's", len(b.Blocks[1].Fields))
			}
			if !strings.HasPrefix(b.Blocks[0].Text.Text, ":warning:") {
				t.Errorf("an error's header %q does not start with :warning:", b.Blocks[0].Text.Text)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := MustSendToSlack(t, tc.n)
			tc.check(t, slackTexts(b), b)
		})
	}
}
