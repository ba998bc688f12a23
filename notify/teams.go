package notify

import (
	"net/http"
)

// Teams refuses a message over about 28 KB; the free texts are cut well below it.
const (
	teamsMessageMax = 3000 // runes of the Event's message
	teamsDiffMax    = 8000 // runes of the diff
)

// teamsMessage is the body a Teams workflow ("When a Teams webhook request is received") posts:
// a message with one Adaptive Card attachment.
type teamsMessage struct {
	Type        string            `json:"type"`
	Attachments []teamsAttachment `json:"attachments"`
}

// teamsAttachment carries the card; ContentURL is always null.
type teamsAttachment struct {
	ContentType string       `json:"contentType"`
	ContentURL  *string      `json:"contentUrl"`
	Content     adaptiveCard `json:"content"`
}

// adaptiveCard is an Adaptive Card, version 1.4 (what Teams renders everywhere).
type adaptiveCard struct {
	Schema  string        `json:"$schema"`
	Type    string        `json:"type"`
	Version string        `json:"version"`
	Body    []cardElement `json:"body"`
	Actions []cardAction  `json:"actions,omitempty"`
	// MSTeams widens the card to the message's width, for the diff.
	MSTeams map[string]string `json:"msteams,omitempty"`
}

// cardElement is a TextBlock, FactSet, RichTextBlock or TextRun; only the fields its type uses
// are set.
type cardElement struct {
	Type     string        `json:"type"`
	Text     string        `json:"text,omitempty"`
	Weight   string        `json:"weight,omitempty"`
	Size     string        `json:"size,omitempty"`
	Color    string        `json:"color,omitempty"`
	FontType string        `json:"fontType,omitempty"`
	Wrap     bool          `json:"wrap,omitempty"`
	Facts    []cardFact    `json:"facts,omitempty"`
	Inlines  []cardElement `json:"inlines,omitempty"`
}

// cardFact is one line of a FactSet.
type cardFact struct {
	Title string `json:"title"`
	Value string `json:"value"`
}

// cardAction is an Action.OpenUrl.
type cardAction struct {
	Type  string `json:"type"`
	Title string `json:"title"`
	URL   string `json:"url"`
}

// NewTeams returns a Sender that posts each Notice as an Adaptive Card to the Microsoft Teams
// workflow webhook (Power Automate's "When a Teams webhook request is received") at url with
// client (nil: http.DefaultClient). The URL carries its signature and never appears in an error.
func NewTeams(url string, client *http.Client) Sender {
	return &jsonPoster{url: url, client: client, layout: func(n Notice) any { return teamsMessageOf(n) }}
}

// teamsMessageOf lays n out: the title, the message, the fields that are set, the diff, and a
// button to the link.
func teamsMessageOf(n Notice) teamsMessage {
	title := cardElement{Type: "TextBlock", Text: n.Title(), Weight: "Bolder", Size: "Medium", Wrap: true}
	if n.Severity == SeverityError {
		title.Color = "Attention"
	}
	body := []cardElement{title}
	if n.Message != "" {
		body = append(body, cardElement{Type: "TextBlock", Text: truncate(n.Message, teamsMessageMax), Wrap: true})
	}
	if fields := noticeFields(n); len(fields) > 0 {
		facts := make([]cardFact, 0, len(fields))
		for _, f := range fields {
			facts = append(facts, cardFact{Title: f.name, Value: f.value})
		}
		body = append(body, cardElement{Type: "FactSet", Facts: facts})
	}
	if n.Diff != "" {
		// A TextBlock reads its text as Markdown, which would turn a diff's "- " lines into
		// bullets; a TextRun shows its text as it is.
		run := cardElement{Type: "TextRun", Text: truncate(n.Diff, teamsDiffMax), FontType: "Monospace"}
		body = append(body, cardElement{Type: "RichTextBlock", Inlines: []cardElement{run}})
	}
	card := adaptiveCard{
		Schema:  "http://adaptivecards.io/schemas/adaptive-card.json",
		Type:    "AdaptiveCard",
		Version: "1.4",
		Body:    body,
		MSTeams: map[string]string{"width": "Full"},
	}
	if n.Link != "" {
		card.Actions = []cardAction{{Type: "Action.OpenUrl", Title: "Open on the operator page", URL: n.Link}}
	}
	return teamsMessage{
		Type: "message",
		Attachments: []teamsAttachment{{
			ContentType: "application/vnd.microsoft.card.adaptive",
			Content:     card,
		}},
	}
}
