package receiver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"slices"
)

// payload is the JSON document of a delivery. GitHub, Gitea and Gogs can also send it
// form-encoded, as the "payload" field; the signature still covers the raw body.
func payload(h http.Header, body []byte) []byte {
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	if err != nil || mt != "application/x-www-form-urlencoded" {
		return body
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return body
	}
	return []byte(form.Get("payload"))
}

// decode unmarshals a JSON object; an empty body is not one.
func decode(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return errors.New("empty body")
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("decode JSON: %w", err)
	}
	return nil
}

// githubRepositories reads a GitHub, Gitea or Gogs payload: they share the repository object.
func githubRepositories(body []byte) ([]string, error) {
	var p struct {
		Repository struct {
			CloneURL string `json:"clone_url"`
			SSHURL   string `json:"ssh_url"`
			HTMLURL  string `json:"html_url"`
			FullName string `json:"full_name"`
		} `json:"repository"`
	}
	if err := decode(body, &p); err != nil {
		return nil, err
	}
	r := p.Repository
	return forms(r.CloneURL, r.SSHURL, r.HTMLURL, r.FullName), nil
}

// gitlabRepositories reads a GitLab payload: project.* where present, else the older repository.*.
func gitlabRepositories(body []byte) ([]string, error) {
	var p struct {
		Project struct {
			HTTPURL  string `json:"git_http_url"`
			SSHURL   string `json:"git_ssh_url"`
			WebURL   string `json:"web_url"`
			FullPath string `json:"path_with_namespace"`
		} `json:"project"`
		Repository struct {
			HTTPURL  string `json:"git_http_url"`
			SSHURL   string `json:"git_ssh_url"`
			Homepage string `json:"homepage"`
			URL      string `json:"url"`
		} `json:"repository"`
	}
	if err := decode(body, &p); err != nil {
		return nil, err
	}
	pr, r := p.Project, p.Repository
	return forms(pr.HTTPURL, pr.SSHURL, pr.WebURL, pr.FullPath, r.HTTPURL, r.SSHURL, r.Homepage, r.URL), nil
}

// bitbucketRepositories reads a Bitbucket Server / Data Center payload (links are lists of
// {href}); the Cloud shape (links are single {href}, full_name) is read too.
func bitbucketRepositories(body []byte) ([]string, error) {
	var p struct {
		Repository struct {
			Slug     string `json:"slug"`
			FullName string `json:"full_name"`
			Project  struct {
				Key string `json:"key"`
			} `json:"project"`
			Links struct {
				Clone hrefs `json:"clone"`
				Self  hrefs `json:"self"`
				HTML  hrefs `json:"html"`
			} `json:"links"`
		} `json:"repository"`
	}
	if err := decode(body, &p); err != nil {
		return nil, err
	}
	r := p.Repository
	all := append(append(append([]string{}, r.Links.Clone...), r.Links.Self...), r.Links.HTML...)
	if r.Project.Key != "" && r.Slug != "" {
		all = append(all, r.Project.Key+"/"+r.Slug)
	}
	return forms(append(all, r.FullName)...), nil
}

// hrefs are the href of a Bitbucket link or list of links; any other shape is no link.
type hrefs []string

// UnmarshalJSON implements json.Unmarshaler.
func (h *hrefs) UnmarshalJSON(b []byte) error {
	type link struct {
		Href string `json:"href"`
	}
	var list []link
	if json.Unmarshal(b, &list) == nil {
		for _, l := range list {
			*h = append(*h, l.Href)
		}
		return nil
	}
	var one link
	if json.Unmarshal(b, &one) == nil {
		*h = append(*h, one.Href)
	}
	return nil
}

// forms are the non-empty values, each once, in order.
func forms(values ...string) []string {
	var out []string
	for _, v := range values {
		if v == "" || slices.Contains(out, v) {
			continue
		}
		out = append(out, v)
	}
	return out
}
