package receiver

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// cdeventsTestdata holds the CDEvents spec's conformance examples and
// schemas, copied from the CDEvents spec (see ../testdata/README.md).
const cdeventsTestdata = "../testdata/cdevents"

// cdeventExample is one conformance example: the file's bytes and the
// context fields a CI system would copy into the CloudEvent.
type cdeventExample struct {
	name string
	raw  []byte
	ctx  struct {
		ID, Type, Source, Timestamp string
	}
	subjectID string
}

// MustLoadCDEventExamples reads every conformance example (*.json) in dir,
// a directory under cdeventsTestdata.
func MustLoadCDEventExamples(tb testing.TB, dir string) []cdeventExample {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join(cdeventsTestdata, dir, "*.json"))
	if err != nil {
		tb.Fatal(err)
	}
	if len(files) == 0 {
		tb.Fatalf("no conformance examples in %s", filepath.Join(cdeventsTestdata, dir))
	}
	var out []cdeventExample
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		var doc struct {
			Context struct {
				ID, Type, Source, Timestamp string
			}
			Subject struct{ ID string }
		}
		if err := json.Unmarshal(raw, &doc); err != nil {
			tb.Fatalf("%s: %v", f, err)
		}
		ex := cdeventExample{name: filepath.Join(dir, filepath.Base(f)), raw: raw, subjectID: doc.Subject.ID}
		ex.ctx = doc.Context
		out = append(out, ex)
	}
	return out
}

// cdeventBinaryRequest sends body as a CloudEvent in binary mode, its attributes
// in ce-* headers taken from the example's context.
func cdeventBinaryRequest(ex cdeventExample, body []byte) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/hook/x", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("ce-specversion", "1.0")
	r.Header.Set("ce-id", ex.ctx.ID)
	r.Header.Set("ce-type", ex.ctx.Type)
	r.Header.Set("ce-source", ex.ctx.Source)
	r.Header.Set("ce-time", ex.ctx.Timestamp)
	return r
}

// cloudEventEnvelope wraps data in a structured-mode CloudEvent with the
// example's context; extra fields are set (or, when nil, removed) last.
func cloudEventEnvelope(tb testing.TB, ex cdeventExample, data []byte, extra map[string]any) []byte {
	tb.Helper()
	env := map[string]any{
		"specversion":     "1.0",
		"id":              ex.ctx.ID,
		"type":            ex.ctx.Type,
		"source":          ex.ctx.Source,
		"time":            ex.ctx.Timestamp,
		"datacontenttype": "application/json",
		"data":            json.RawMessage(data),
	}
	for k, v := range extra {
		if v == nil {
			delete(env, k)
			continue
		}
		env[k] = v
	}
	out, err := json.Marshal(env)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// cdeventStructuredRequest sends a structured-mode CloudEvent envelope.
func cdeventStructuredRequest(envelope []byte) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/hook/x", bytes.NewReader(envelope))
	r.Header.Set("Content-Type", "application/cloudevents+json; charset=utf-8")
	return r
}

// parseCDEventBinary runs ParseCDEvent on body sent in binary mode.
func parseCDEventBinary(ex cdeventExample, body []byte, events []string) (CDEvent, error) {
	return ParseCDEvent(cdeventBinaryRequest(ex, body), body, events)
}

// parseCDEventStructured runs ParseCDEvent on data sent in structured mode.
func parseCDEventStructured(tb testing.TB, ex cdeventExample, data []byte, events []string) (CDEvent, error) {
	tb.Helper()
	env := cloudEventEnvelope(tb, ex, data, nil)
	return ParseCDEvent(cdeventStructuredRequest(env), env, events)
}

// assertCDEventRefusal fails unless err is a *CDEventRefusal with this status and reason.
func assertCDEventRefusal(tb testing.TB, err error, status int, reason string) {
	tb.Helper()
	var ref *CDEventRefusal
	if !errors.As(err, &ref) {
		tb.Fatalf("got error %v, want a *CDEventRefusal %d %s", err, status, reason)
	}
	if ref.Status != status || ref.Reason != reason {
		tb.Fatalf("got refusal %d %s (%s), want %d %s", ref.Status, ref.Reason, ref.Message, status, reason)
	}
}

func TestEveryConformanceExampleIsAcceptedInBothModes(t *testing.T) {
	for _, dir := range []string{"conformance", "v0.4.1/conformance"} {
		for _, ex := range MustLoadCDEventExamples(t, dir) {
			for mode, parse := range map[string]func() (CDEvent, error){
				"binary":     func() (CDEvent, error) { return parseCDEventBinary(ex, ex.raw, nil) },
				"structured": func() (CDEvent, error) { return parseCDEventStructured(t, ex, ex.raw, nil) },
			} {
				t.Run(ex.name+"/"+mode, func(t *testing.T) {
					got, err := parse()
					if err != nil {
						t.Fatal(err)
					}
					if got.ID != ex.ctx.ID || got.Type != ex.ctx.Type || got.Source != ex.ctx.Source || got.SubjectID != ex.subjectID {
						t.Fatalf("got %+v, want id %q type %q source %q subject %q",
							got, ex.ctx.ID, ex.ctx.Type, ex.ctx.Source, ex.subjectID)
					}
				})
			}
		}
	}
}

func TestRepositoryReferencesAreReported(t *testing.T) {
	byName := map[string]cdeventExample{}
	for _, dir := range []string{"conformance", "v0.4.1/conformance"} {
		for _, ex := range MustLoadCDEventExamples(t, dir) {
			byName[ex.name] = ex
		}
	}
	for name, want := range map[string][]string{
		"conformance/change_merged.json":             {"TestRepo/TestOrg", "https://example.org"},
		"conformance/branch_created.json":            {"TestRepo/TestOrg", "https://example.org"},
		"v0.4.1/conformance/change_merged.json":      {"TestRepo/TestOrg", "https://example.org"},
		"conformance/repository_modified.json":       {"https://example.org/TestOrg/TestRepo", "https://example.org/view/TestOrg/TestRepo", "TestOrg/TestRepo"},
		"v0.4.1/conformance/repository_created.json": {"https://example.org/TestOrg/TestRepo", "https://example.org/view/TestOrg/TestRepo", "TestOrg/TestRepo"},
		"conformance/build_started.json":             nil,
		"conformance/pipelinerun_finished.json":      nil,
	} {
		ex, ok := byName[filepath.FromSlash(name)]
		if !ok {
			t.Fatalf("no example %s", name)
		}
		got, err := parseCDEventBinary(ex, ex.raw, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !slices.Equal(got.Repository, want) {
			t.Errorf("%s: repository %q, want %q", name, got.Repository, want)
		}
	}
}

// MustCompileCDEventSchemas loads every JSON schema of the spec into one
// compiler (they refer to each other by $id) and compiles one per event
// schema, indexed by the event type it allows.
func MustCompileCDEventSchemas(tb testing.TB) map[string]*jsonschema.Schema {
	tb.Helper()
	dir := filepath.Join(cdeventsTestdata, "schemas")
	c := jsonschema.NewCompiler()
	types := map[string]string{} // event type -> schema $id
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".json") {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		doc, err := jsonschema.UnmarshalJSON(f)
		if err != nil {
			return err
		}
		// Add each schema under its own $id when that is absolute, so
		// that $refs between schemas resolve without a loader.
		abs, err := filepath.Abs(path)
		if err != nil {
			return err
		}
		url := "file://" + filepath.ToSlash(abs)
		id, _ := doc.(map[string]any)["$id"].(string)
		if strings.HasPrefix(id, "https://") {
			url = id
		}
		if err := c.AddResource(url, doc); err != nil {
			return err
		}
		if typ := schemaEventType(doc); typ != "" {
			types[typ] = url
		}
		return nil
	})
	if err != nil {
		tb.Fatalf("loading schemas: %v", err)
	}
	out := map[string]*jsonschema.Schema{}
	for typ, url := range types {
		sch, err := c.Compile(url)
		if err != nil {
			tb.Fatalf("compiling %s: %v", url, err)
		}
		out[typ] = sch
	}
	return out
}

// schemaEventType returns the one context.type an event schema allows, or
// "" for schemas that describe no event (links, definitions).
func schemaEventType(doc any) string {
	get := func(v any, k string) any {
		m, _ := v.(map[string]any)
		return m[k]
	}
	enum, _ := get(get(get(get(get(doc, "properties"), "context"), "properties"), "type"), "enum").([]any)
	if len(enum) != 1 {
		return ""
	}
	s, _ := enum[0].(string)
	return s
}

// mutateCDEvent returns a copy of raw with change applied to its decoded form.
func mutateCDEvent(tb testing.TB, raw []byte, change func(doc map[string]any)) []byte {
	tb.Helper()
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		tb.Fatal(err)
	}
	change(doc)
	out, err := json.Marshal(doc)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// cdeventField returns doc[k] when it is an object, else nil.
func cdeventField(doc map[string]any, k string) map[string]any {
	m, _ := doc[k].(map[string]any)
	return m
}

// TestSchemaAndReceiverAgree runs every spec HEAD example, and mutations of
// it that remove what every CDEvent requires, through both the official
// schema and ParseCDEvent: both accept the example and both refuse each
// mutation.
func TestSchemaAndReceiverAgree(t *testing.T) {
	schemas := MustCompileCDEventSchemas(t)
	mutations := map[string]func(doc map[string]any){
		"no context.id":          func(d map[string]any) { delete(cdeventField(d, "context"), "id") },
		"no context.source":      func(d map[string]any) { delete(cdeventField(d, "context"), "source") },
		"no context.timestamp":   func(d map[string]any) { delete(cdeventField(d, "context"), "timestamp") },
		"no context.specversion": func(d map[string]any) { delete(cdeventField(d, "context"), "specversion") },
		"empty context.type":     func(d map[string]any) { cdeventField(d, "context")["type"] = "" },
		"empty context.id":       func(d map[string]any) { cdeventField(d, "context")["id"] = "" },
		"no context":             func(d map[string]any) { delete(d, "context") },
		"no subject":             func(d map[string]any) { delete(d, "subject") },
		"no subject.id":          func(d map[string]any) { delete(cdeventField(d, "subject"), "id") },
		"no subject.content":     func(d map[string]any) { delete(cdeventField(d, "subject"), "content") },
		"subject.content string": func(d map[string]any) { cdeventField(d, "subject")["content"] = "not an object" },
		"subject.content array":  func(d map[string]any) { cdeventField(d, "subject")["content"] = []any{} },
		"subject.content null":   func(d map[string]any) { cdeventField(d, "subject")["content"] = nil },
	}
	validate := func(sch *jsonschema.Schema, raw []byte) error {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			return err
		}
		return sch.Validate(doc)
	}
	for _, ex := range MustLoadCDEventExamples(t, "conformance") {
		t.Run(ex.name, func(t *testing.T) {
			sch, ok := schemas[ex.ctx.Type]
			if !ok {
				t.Fatalf("no schema allows type %s", ex.ctx.Type)
			}
			if err := validate(sch, ex.raw); err != nil {
				t.Fatalf("schema refuses the example: %v", err)
			}
			if _, err := parseCDEventBinary(ex, ex.raw, nil); err != nil {
				t.Fatalf("receiver refuses the example: %v", err)
			}
			for name, change := range mutations {
				bad := mutateCDEvent(t, ex.raw, change)
				if validate(sch, bad) == nil {
					t.Errorf("%s: schema accepts it", name)
				}
				_, errB := parseCDEventBinary(ex, bad, nil)
				_, errS := parseCDEventStructured(t, ex, bad, nil)
				for mode, err := range map[string]error{"binary": errB, "structured": errS} {
					var ref *CDEventRefusal
					if !errors.As(err, &ref) || ref.Status != http.StatusBadRequest {
						t.Errorf("%s, %s mode: receiver answers %v, want a 400 refusal", name, mode, err)
					}
				}
			}
		})
	}
}

func TestCDEventRefusals(t *testing.T) {
	var merged, mergedOld cdeventExample
	for _, ex := range MustLoadCDEventExamples(t, "conformance") {
		if ex.name == filepath.Join("conformance", "change_merged.json") {
			merged = ex
		}
	}
	for _, ex := range MustLoadCDEventExamples(t, "v0.4.1/conformance") {
		if strings.HasSuffix(ex.name, "change_merged.json") {
			mergedOld = ex
		}
	}
	withHeader := func(r *http.Request, k, v string) *http.Request {
		if v == "" {
			r.Header.Del(k)
		} else {
			r.Header.Set(k, v)
		}
		return r
	}
	tests := []struct {
		name   string
		req    func() (*http.Request, []byte)
		reason string
	}{
		{"ce-type differs from context.type", func() (*http.Request, []byte) {
			return withHeader(cdeventBinaryRequest(merged, merged.raw), "ce-type", "dev.cdevents.change.merged.0.2.0"), merged.raw
		}, cdeventTypeMismatch},
		{"structured type differs from context.type", func() (*http.Request, []byte) {
			env := cloudEventEnvelope(t, merged, merged.raw, map[string]any{"type": "dev.cdevents.change.created.0.4.0"})
			return cdeventStructuredRequest(env), env
		}, cdeventTypeMismatch},
		{"binary body not JSON", func() (*http.Request, []byte) {
			body := []byte("this is not json")
			return cdeventBinaryRequest(merged, body), body
		}, cdeventUnparseable},
		{"binary body a JSON array", func() (*http.Request, []byte) {
			body := []byte(`[` + string(merged.raw) + `]`)
			return cdeventBinaryRequest(merged, body), body
		}, cdeventUnparseable},
		{"binary body truncated", func() (*http.Request, []byte) {
			body := merged.raw[:len(merged.raw)/2]
			return cdeventBinaryRequest(merged, body), body
		}, cdeventUnparseable},
		{"binary body empty", func() (*http.Request, []byte) {
			return cdeventBinaryRequest(merged, nil), nil
		}, cdeventMissingField},
		{"no CloudEvents headers", func() (*http.Request, []byte) {
			r := httptest.NewRequest(http.MethodPost, "/hook/x", bytes.NewReader(merged.raw))
			r.Header.Set("Content-Type", "application/json")
			return r, merged.raw
		}, cdeventUnparseable},
		{"binary without ce-id", func() (*http.Request, []byte) {
			return withHeader(cdeventBinaryRequest(merged, merged.raw), "ce-id", ""), merged.raw
		}, cdeventUnparseable},
		{"CloudEvent type not a CDEvent", func() (*http.Request, []byte) {
			return withHeader(cdeventBinaryRequest(merged, merged.raw), "ce-type", "com.github.push"), merged.raw
		}, cdeventNotACDEvent},
		{"context.type not a CDEvent", func() (*http.Request, []byte) {
			body := mutateCDEvent(t, merged.raw, func(d map[string]any) { cdeventField(d, "context")["type"] = "com.github.push" })
			return cdeventBinaryRequest(merged, body), body
		}, cdeventNotACDEvent},
		{"structured without data", func() (*http.Request, []byte) {
			env := cloudEventEnvelope(t, merged, merged.raw, map[string]any{"data": nil, "datacontenttype": nil})
			return cdeventStructuredRequest(env), env
		}, cdeventMissingField},
		{"structured data a string", func() (*http.Request, []byte) {
			env := cloudEventEnvelope(t, merged, merged.raw, map[string]any{"data": "hello"})
			return cdeventStructuredRequest(env), env
		}, cdeventUnparseable},
		{"structured envelope not JSON", func() (*http.Request, []byte) {
			env := []byte(`{"specversion": "1.0", "id": `)
			return cdeventStructuredRequest(env), env
		}, cdeventUnparseable},
		{"structured envelope without id", func() (*http.Request, []byte) {
			env := cloudEventEnvelope(t, merged, merged.raw, map[string]any{"id": nil})
			return cdeventStructuredRequest(env), env
		}, cdeventUnparseable},
		{"batch mode", func() (*http.Request, []byte) {
			env := []byte(`[` + string(cloudEventEnvelope(t, merged, merged.raw, nil)) + `]`)
			r := cdeventStructuredRequest(env)
			r.Header.Set("Content-Type", "application/cloudevents-batch+json")
			return r, env
		}, cdeventUnparseable},
		{"v0.4.1 event without version", func() (*http.Request, []byte) {
			body := mutateCDEvent(t, mergedOld.raw, func(d map[string]any) { delete(cdeventField(d, "context"), "version") })
			return cdeventBinaryRequest(mergedOld, body), body
		}, cdeventMissingField},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, body := tt.req()
			got, err := ParseCDEvent(r, body, nil)
			if err == nil {
				t.Fatalf("accepted: %+v", got)
			}
			assertCDEventRefusal(t, err, http.StatusBadRequest, tt.reason)
		})
	}
}

func TestStructuredModeWithBase64Data(t *testing.T) {
	for _, ex := range MustLoadCDEventExamples(t, "conformance")[:3] {
		env := cloudEventEnvelope(t, ex, nil, map[string]any{
			"data":        nil,
			"data_base64": base64.StdEncoding.EncodeToString(ex.raw),
		})
		got, err := ParseCDEvent(cdeventStructuredRequest(env), env, nil)
		if err != nil {
			t.Fatalf("%s: %v", ex.name, err)
		}
		if got.ID != ex.ctx.ID || got.Type != ex.ctx.Type {
			t.Fatalf("%s: got %+v", ex.name, got)
		}
	}
}

func TestEventsFilterMatchesWithOrWithoutVersion(t *testing.T) {
	var merged cdeventExample // dev.cdevents.change.merged.0.3.0
	for _, ex := range MustLoadCDEventExamples(t, "conformance") {
		if strings.HasSuffix(ex.name, "change_merged.json") {
			merged = ex
		}
	}
	tests := []struct {
		name   string
		events []string
		want   bool
	}{
		{"empty filter takes every event", nil, true},
		{"type without version", []string{"dev.cdevents.change.merged"}, true},
		{"full type", []string{"dev.cdevents.change.merged.0.3.0"}, true},
		{"one of several", []string{"dev.cdevents.branch.created", "dev.cdevents.change.merged"}, true},
		{"another version", []string{"dev.cdevents.change.merged.0.2.0"}, false},
		{"another type", []string{"dev.cdevents.change.created"}, false},
		{"a prefix is not a type", []string{"dev.cdevents.change"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for mode, parse := range map[string]func() (CDEvent, error){
				"binary":     func() (CDEvent, error) { return parseCDEventBinary(merged, merged.raw, tt.events) },
				"structured": func() (CDEvent, error) { return parseCDEventStructured(t, merged, merged.raw, tt.events) },
			} {
				got, err := parse()
				if tt.want {
					if err != nil || got.Type != merged.ctx.Type {
						t.Fatalf("%s: got %+v, %v; want accepted", mode, got, err)
					}
					continue
				}
				assertCDEventRefusal(t, err, http.StatusOK, cdeventEventFiltered)
			}
		})
	}
}

func TestTypeMatches(t *testing.T) {
	tests := []struct {
		filter, typ string
		want        bool
	}{
		{"dev.cdevents.change.merged", "dev.cdevents.change.merged.0.2.0", true},
		{"dev.cdevents.change.merged", "dev.cdevents.change.merged.0.3.0", true},
		{"dev.cdevents.change.merged", "dev.cdevents.change.merged.0.6.0-draft", true},
		{"dev.cdevents.change.merged.0.2.0", "dev.cdevents.change.merged.0.2.0", true},
		{"dev.cdevents.change.merged.0.2.0", "dev.cdevents.change.merged.0.3.0", false},
		{"dev.cdevents.change.merged", "dev.cdevents.change.mergedx.0.2.0", false},
		{"dev.cdevents.change", "dev.cdevents.change.merged.0.2.0", false},
		{"dev.cdevents.change.merged.0", "dev.cdevents.change.merged.0.2.0", false},
		{"dev.cdevents.change.merged", "dev.cdevents.change.merged", true},
		{"", "dev.cdevents.change.merged.0.2.0", false},
	}
	for _, tt := range tests {
		if got := TypeMatches(tt.filter, tt.typ); got != tt.want {
			t.Errorf("TypeMatches(%q, %q) = %v, want %v", tt.filter, tt.typ, got, tt.want)
		}
	}
}

func TestRefusalWrapsTheParserError(t *testing.T) {
	var merged cdeventExample
	for _, ex := range MustLoadCDEventExamples(t, "conformance") {
		if strings.HasSuffix(ex.name, "change_merged.json") {
			merged = ex
		}
	}
	body := []byte(`{"context": 42}`)
	_, err := parseCDEventBinary(merged, body, nil)
	assertCDEventRefusal(t, err, http.StatusBadRequest, cdeventUnparseable)
	var typeErr *json.UnmarshalTypeError
	if !errors.As(err, &typeErr) {
		t.Fatalf("refusal %v does not wrap the JSON error", err)
	}
}

// FuzzParseCDEvent feeds arbitrary bodies, in binary and structured mode, to
// ParseCDEvent: it never panics, refuses with a CDEventRefusal, and what it
// accepts carries every required field.
func FuzzParseCDEvent(f *testing.F) {
	examples := MustLoadCDEventExamples(f, "conformance")
	for _, ex := range examples[:5] {
		f.Add(ex.raw, false)
		f.Add(cloudEventEnvelope(f, ex, ex.raw, nil), true)
	}
	f.Add([]byte(`{"context":{},"subject":{"content":[]}}`), false)
	ex := examples[0]
	f.Fuzz(func(t *testing.T, body []byte, structured bool) {
		r := cdeventBinaryRequest(ex, body)
		if structured {
			r = cdeventStructuredRequest(body)
		}
		got, err := ParseCDEvent(r, body, nil)
		if err != nil {
			var ref *CDEventRefusal
			if !errors.As(err, &ref) {
				t.Fatalf("error %v is not a *CDEventRefusal", err)
			}
			return
		}
		if got.ID == "" || got.Source == "" || got.SubjectID == "" || !strings.HasPrefix(got.Type, "dev.cdevents.") {
			t.Fatalf("accepted an incomplete CDEvent: %+v", got)
		}
	})
}
