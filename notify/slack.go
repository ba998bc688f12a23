package notify

import (
	"net/http"
	"strings"
	"unicode/utf8"
)

// Slack's limits on Block Kit text (https://api.slack.com/reference/block-kit/blocks): a message
// that breaks one is refused whole (400 invalid_blocks), so every text is cut to fit.
const (
	slackHeaderMax  = 150  // a header block's plain_text
	slackSectionMax = 3000 // a section's text, and the message's fallback text
	slackFieldMax   = 2000 // each of a section's fields
)

// slackMessage is the body of a Slack incoming webhook: Text is what notifications and clients
// without blocks show.
type slackMessage struct {
	Text   string       `json:"text"`
	Blocks []slackBlock `json:"blocks"`
}

// slackBlock is a header, section or context block; only the fields its type uses are set.
type slackBlock struct {
	Type     string      `json:"type"`
	Text     *slackText  `json:"text,omitempty"`
	Fields   []slackText `json:"fields,omitempty"`
	Elements []slackText `json:"elements,omitempty"`
}

// slackText is a text object: Type is "plain_text" or "mrkdwn".
type slackText struct {
	Type  string `json:"type"`
	Text  string `json:"text"`
	Emoji bool   `json:"emoji,omitempty"`
}

// NewSlack returns a Sender that posts each Notice as a Block Kit message to the Slack incoming
// webhook at url with client (nil: http.DefaultClient). The URL is a secret and never appears in
// an error.
func NewSlack(url string, client *http.Client) Sender {
	return &jsonPoster{url: url, client: client, layout: func(n Notice) any { return slackMessageOf(n) }}
}

// slackMessageOf lays n out: a header with the title, the message, the fields that are set, the
// diff in a code block, and the link.
func slackMessageOf(n Notice) slackMessage {
	emoji := ":information_source: "
	if n.Severity == SeverityError {
		emoji = ":warning: "
	}
	blocks := []slackBlock{{
		Type: "header",
		Text: &slackText{Type: "plain_text", Text: truncate(emoji+n.Title(), slackHeaderMax), Emoji: true},
	}}
	if n.Message != "" {
		blocks = append(blocks, slackSection(slackEscape(n.Message, slackSectionMax)))
	}
	var fields []slackText
	for _, f := range noticeFields(n) {
		label := "*" + f.name + "*\n"
		text := label + slackEscape(f.value, slackFieldMax-utf8.RuneCountInString(label))
		fields = append(fields, slackText{Type: "mrkdwn", Text: text})
	}
	if len(fields) > 0 {
		blocks = append(blocks, slackBlock{Type: "section", Fields: fields})
	}
	if n.Diff != "" {
		const fence = "```"
		diff := slackEscape(n.Diff, slackSectionMax-2*len(fence)-2)
		blocks = append(blocks, slackSection(fence+"\n"+diff+"\n"+fence))
	}
	if n.Link != "" {
		// In a link, | ends the URL: it is percent-encoded, as a URL may spell it.
		link := "<" + slackEscape(strings.ReplaceAll(n.Link, "|", "%7C"), slackSectionMax) + "|Open on the operator page>"
		blocks = append(blocks, slackBlock{Type: "context", Elements: []slackText{{Type: "mrkdwn", Text: link}}})
	}
	return slackMessage{Text: slackEscape(n.Title(), slackSectionMax), Blocks: blocks}
}

// slackSection is a section block of mrkdwn text.
func slackSection(text string) slackBlock {
	return slackBlock{Type: "section", Text: &slackText{Type: "mrkdwn", Text: text}}
}

// slackEscaper escapes the three characters Slack's mrkdwn reserves.
var slackEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// slackEscape escapes s for mrkdwn and cuts the result to at most limit runes, ending with "…"
// when cut. It cuts between escapes, never inside one.
func slackEscape(s string, limit int) string {
	if esc := slackEscaper.Replace(s); utf8.RuneCountInString(esc) <= limit {
		return esc
	}
	if limit <= 0 {
		return ""
	}
	var b strings.Builder
	n := 0
	for _, r := range s {
		esc := slackEscaper.Replace(string(r))
		w := utf8.RuneCountInString(esc)
		if n+w > limit-1 {
			break
		}
		b.WriteString(esc)
		n += w
	}
	return b.String() + "…"
}

// noticeField is one labelled value of a Notice, as Slack's fields and Teams' facts show it.
type noticeField struct{ name, value string }

// noticeFields are the fields of n that are set, in the order the channels show them.
func noticeFields(n Notice) []noticeField {
	var out []noticeField
	for _, f := range []noticeField{
		{"Object", n.Object.String()},
		{"Destination", n.Destination},
		{"Commit", shortCommit(n.Commit)},
		{"Author", n.Author},
		{"File", n.File},
	} {
		if strings.TrimSpace(f.value) != "" {
			out = append(out, f)
		}
	}
	return out
}

// shortCommit abbreviates a commit hash as people read it.
func shortCommit(sha string) string {
	const short = 12
	if len(sha) > short {
		return sha[:short]
	}
	return sha
}
