package watch

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// The mirror reads lists and watch streams as JSON text, token by token (jsontext, the text layer
// of encoding/json/v2), and builds each object once. client-go's dynamic client parses every list
// and event twice, once to learn what it is and once into a map, which was most of a seed's CPU.
//
// Numbers become int64 when they are integers that fit and float64 otherwise, as client-go makes
// them, so that an object's canonical JSON (and so its hash, and its match with the admission
// request the webhook saw) is the same whichever decoder read it. What no part of the mirror reads
// and sanitize drops anyway is skipped without being built: the object's status, and the field
// sets (fieldsV1) of its managedFields, whose managers and times the noise filters still read
// (adopted folders read the field sets too: fieldSets keeps them).

// newDecoder reads JSON from r as the apiserver writes it. Like encoding/json, it accepts invalid
// UTF-8 (as U+FFFD) and a repeated name (the last wins), so the objects are what client-go made.
func newDecoder(r io.Reader) *jsontext.Decoder {
	return jsontext.NewDecoder(r, jsontext.AllowInvalidUTF8(true), jsontext.AllowDuplicateNames(true))
}

// decodeObject reads the JSON object at dec's position as an unstructured object's map.
func decodeObject(dec *jsontext.Decoder, fieldSets bool) (map[string]any, error) {
	return readObject(dec, func(dec *jsontext.Decoder, name string) (any, error) {
		switch name {
		case "status":
			return dropped, dec.SkipValue()
		case "metadata":
			return readObject(dec, func(dec *jsontext.Decoder, name string) (any, error) {
				if name != "managedFields" {
					return readValue(dec, nil)
				}
				return readValue(dec, func(dec *jsontext.Decoder, name string) (any, error) {
					if name == "fieldsV1" && !fieldSets {
						return dropped, dec.SkipValue()
					}
					return readValue(dec, nil)
				})
			})
		}
		return readValue(dec, nil)
	})
}

// member reads the value of an object's member name, or skips it and returns dropped. The member
// of an object handed to readValue reads (or drops) the members of every object in that value,
// the value itself if an object, the elements if an array of objects; nested deeper, readValue
// reads all.
type member func(dec *jsontext.Decoder, name string) (any, error)

// dropped is what a member returns for a value it skipped: the object leaves the name out.
var dropped = &struct{ byte }{}

// readObject reads a JSON object, each member's value through member (readValue when nil).
func readObject(dec *jsontext.Decoder, member member) (map[string]any, error) {
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return nil, unexpected("object", tok, err)
	}
	out := map[string]any{}
	for dec.PeekKind() != '}' {
		name, err := dec.ReadToken()
		if err != nil {
			return nil, unexpected("object", name, err)
		}
		key := name.String()
		var v any
		if member != nil {
			v, err = member(dec, key)
		} else {
			v, err = readValue(dec, nil)
		}
		if err != nil {
			return nil, err
		}
		if v != dropped {
			out[key] = v
		}
	}
	if tok, err := dec.ReadToken(); err != nil {
		return nil, unexpected("object", tok, err)
	}
	return out, nil
}

// readValue reads any JSON value: objects as map[string]any (each member through member when set,
// as readObject does, for the objects of an array too), arrays as []any, numbers as int64 or
// float64, strings, booleans and null.
func readValue(dec *jsontext.Decoder, member member) (any, error) {
	switch dec.PeekKind() {
	case '{':
		return readObject(dec, member)
	case '[':
		_, _ = dec.ReadToken() // PeekKind saw it
		out := []any{}
		for dec.PeekKind() != ']' {
			if dec.PeekKind() == 0 {
				break // the error comes below
			}
			v, err := readValue(dec, member)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		if tok, err := dec.ReadToken(); err != nil {
			return nil, unexpected("array", tok, err)
		}
		return out, nil
	}
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, unexpected("value", tok, err)
	}
	switch tok.Kind() {
	case '"':
		return tok.String(), nil
	case 't', 'f':
		return tok.Bool(), nil
	case 'n':
		return nil, nil
	case '0':
		return number(tok.String())
	}
	return nil, unexpected("value", tok, nil)
}

// number is a JSON number as client-go decodes it into an unstructured object.
func number(s string) (any, error) {
	if !strings.Contains(s, ".") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i, nil
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, fmt.Errorf("decode number %s: %w", s, err)
	}
	return f, nil
}

func unexpected(what string, tok jsontext.Token, err error) error {
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("decode %s: %w", what, err)
	}
	return fmt.Errorf("decode %s: found %v", what, tok.Kind())
}
