package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"
)

const (
	// userAgent names the daemon to the channels it posts to.
	userAgent = "gitops-reverser"
	// maxAnswer caps what is read of a channel's answer: enough for an error message, and the
	// rest of a large answer is not worth reading (the connection is not reused then).
	maxAnswer = 4 << 10
	// maxSnippet caps how much of an answer an error quotes.
	maxSnippet = 256
)

// postJSON posts v, encoded as JSON, to target.
func postJSON(ctx context.Context, client *http.Client, target string, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return &SendError{Err: fmt.Errorf("encoding the message for %s: %w", redactURL(target), err)}
	}
	return post(ctx, client, target, http.Header{"Content-Type": {"application/json"}}, body)
}

// post sends body with header to target and says how the channel answered: nil on a 2xx, else a
// *SendError (see send).
func post(ctx context.Context, client *http.Client, target string, header http.Header, body []byte) error {
	req, err := newRequest(ctx, target, bytes.NewReader(body))
	if err != nil {
		return err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	return send(client, req)
}

// newRequest builds a POST to target. The URL of a Slack or Teams webhook is a secret (whoever
// has it can post), so the error names the URL only as redactURL does, and does not wrap the
// parser's error: that one quotes the whole URL.
func newRequest(ctx context.Context, target string, body io.Reader) (*http.Request, error) {
	u, err := url.Parse(target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, &SendError{Err: fmt.Errorf("%s is not an http or https URL", redactURL(target))}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, body)
	if err != nil {
		return nil, &SendError{Err: fmt.Errorf("building the request to %s: %w", redactURL(target), err)}
	}
	return req, nil
}

// send does req with client and maps the outcome to a *SendError: no answer (an error of the
// transport, a timeout, ctx done) is Status 0 and may be retried, as may 429 and 5xx; any other
// status but 2xx is final. A nil client is http.DefaultClient.
func send(client *http.Client, req *http.Request) error {
	if client == nil {
		client = http.DefaultClient
	}
	req.Header.Set("User-Agent", userAgent)
	where := redactURL(req.URL.String())
	resp, err := client.Do(req)
	if err != nil {
		// A *url.Error quotes the URL it failed on: keep the error (a timeout stays a timeout
		// for errors.Is), with its URL redacted.
		if ue, ok := errors.AsType[*url.Error](err); ok {
			ue.URL = redactURL(ue.URL)
		}
		return &SendError{Retry: true, Err: err}
	}
	defer func() { _ = resp.Body.Close() }()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	return &SendError{
		Status: resp.StatusCode,
		Retry:  resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500,
		Err:    fmt.Errorf("%s answered %s", where, snippet(answer)),
	}
}

// redactURL names a channel's URL without what may be secret in it: userinfo, path and query
// ("https://hooks.slack.com/…").
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "the channel's URL"
	}
	return u.Scheme + "://" + u.Host + "/…"
}

// snippet quotes the start of a channel's answer on one line, for an error message.
func snippet(answer []byte) string {
	s := strings.TrimSpace(strings.ToValidUTF8(string(answer), "�"))
	if s == "" {
		return "with an empty body"
	}
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	return fmt.Sprintf("%q", truncate(s, maxSnippet))
}

// truncate cuts s to at most limit runes, ending a cut one with "…".
func truncate(s string, limit int) string {
	if utf8.RuneCountInString(s) <= limit {
		return s
	}
	if limit <= 0 {
		return ""
	}
	return string([]rune(s)[:limit-1]) + "…"
}

// jsonPoster posts each Notice, laid out by layout, as JSON (a Slack message, a Teams card).
type jsonPoster struct {
	url    string
	client *http.Client
	layout func(Notice) any
}

func (p *jsonPoster) Send(ctx context.Context, n Notice) error {
	return postJSON(ctx, p.client, p.url, p.layout(n))
}
