package receiver

import (
	"bytes"
	"context"
	"net/http"
	"net/textproto"
	"strings"

	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/binding/format"
	"github.com/cloudevents/sdk-go/v2/binding/spec"
	"github.com/cloudevents/sdk-go/v2/event"
)

// The CloudEvents HTTP binding, on the receiving side: which request is a CloudEvent, and in
// which mode. The SDK's spec and format packages know the attributes and the event formats;
// only the header mapping is here. (The SDK's protocol/http package has the same mapping with
// a client, a server and a logger it builds at start: half a MiB held by every daemon, receivers
// on or off.)

// ceHeaderPrefix starts the header of every context attribute in binary mode.
const ceHeaderPrefix = "Ce-"

// ceHeader is the header of a context attribute or extension: "Ce-" and its name, but for
// datacontenttype, which is the request's Content-Type.
func ceHeader(name string) string {
	if name == "datacontenttype" {
		return "Content-Type"
	}
	return textproto.CanonicalMIMEHeaderKey(ceHeaderPrefix + name)
}

// ceVersions finds the context attributes among the headers.
var ceVersions = spec.WithPrefixMatchExact(ceHeader, ceHeaderPrefix)

// isCloudEventBatch says whether the request carries a batch of CloudEvents (JSON batch format).
func isCloudEventBatch(header http.Header) bool {
	return header.Get("Content-Type") == event.ApplicationCloudEventsBatchJSON
}

// requestMessage is a received HTTP request as a binding.Message: structured when its
// Content-Type names an event format, binary when it has a ce-specversion header.
type requestMessage struct {
	header  http.Header
	body    []byte
	format  format.Format // structured mode
	version spec.Version  // binary mode
}

var (
	_ binding.Message               = (*requestMessage)(nil)
	_ binding.MessageMetadataReader = (*requestMessage)(nil)
)

func newRequestMessage(header http.Header, body []byte) *requestMessage {
	m := &requestMessage{header: header, body: body, format: format.Lookup(header.Get("Content-Type"))}
	if m.format == nil {
		m.version = ceVersions.Version(header.Get(ceVersions.PrefixedSpecVersionName()))
	}
	return m
}

func (m *requestMessage) ReadEncoding() binding.Encoding {
	switch {
	case m.version != nil:
		return binding.EncodingBinary
	case m.format == format.JSONBatch:
		return binding.EncodingBatch
	case m.format != nil:
		return binding.EncodingStructured
	}
	return binding.EncodingUnknown
}

func (m *requestMessage) ReadStructured(ctx context.Context, w binding.StructuredWriter) error {
	if m.format == nil {
		return binding.ErrNotStructured
	}
	return w.SetStructuredEvent(ctx, m.format, bytes.NewReader(m.body))
}

// ReadBinary hands over every context attribute and extension header, then the body as data.
// An extension's name is its header's after the prefix, in lower case (names are lower case).
func (m *requestMessage) ReadBinary(_ context.Context, w binding.BinaryWriter) error {
	if m.version == nil {
		return binding.ErrNotBinary
	}
	for name, values := range m.header {
		var err error
		if attr := m.version.Attribute(name); attr != nil {
			err = w.SetAttribute(attr, values[0])
		} else if ext, ok := strings.CutPrefix(name, ceHeaderPrefix); ok && ext != "" {
			err = w.SetExtension(strings.ToLower(ext), values[0])
		}
		if err != nil {
			return err
		}
	}
	return w.SetData(bytes.NewReader(m.body))
}

// GetAttribute returns the attribute of kind k in the message's spec version, with its header's
// value, or nil when absent; nil, nil when the version has no such attribute.
func (m *requestMessage) GetAttribute(k spec.Kind) (spec.Attribute, any) {
	if m.version == nil {
		return nil, nil
	}
	attr := m.version.AttributeFromKind(k)
	if attr == nil {
		return nil, nil
	}
	if v := m.header.Get(ceHeader(attr.Name())); v != "" {
		return attr, v
	}
	return attr, nil
}

// GetExtension returns the value of the extension's header, or nil when absent.
func (m *requestMessage) GetExtension(name string) any {
	if v := m.header.Get(ceHeader(name)); v != "" {
		return v
	}
	return nil
}

// Finish has nothing to release: the body was read before.
func (m *requestMessage) Finish(error) error { return nil }
