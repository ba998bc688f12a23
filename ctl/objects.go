package ctl

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// fetch reads objects of gvr (called kind in messages): those named, in the session's
// namespace, else every one that selector picks in the session's namespace (or all of them).
func (s *session) fetch(ctx context.Context, gvr schema.GroupVersionResource, kind string, names []string, selector string) ([]unstructured.Unstructured, error) {
	client := s.ourKind(gvr)
	if len(names) == 0 {
		list, err := client.List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return nil, failed(fmt.Sprintf("list %s in %s", gvr.Resource, s.where()), err)
		}
		return list.Items, nil
	}
	if s.allNamespaces {
		return nil, usageErrorf("a %s cannot be named across all namespaces: give -n NAMESPACE instead of -A", kind)
	}
	out := make([]unstructured.Unstructured, 0, len(names))
	for _, name := range names {
		u, err := client.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, failed(fmt.Sprintf("get %s %s/%s", kind, s.namespace, name), err)
		}
		out = append(out, *u)
	}
	return out, nil
}

// noneFound says, as kubectl does, that a list came back empty: on stderr, so a script reading
// stdout sees nothing.
func (s *session) noneFound() {
	if s.allNamespaces {
		_, _ = fmt.Fprintln(s.stderr, "No resources found")
		return
	}
	_, _ = fmt.Fprintf(s.stderr, "No resources found in %s.\n", s.where())
}

// row is one line of a table (the header too): the namespace first when the table spans
// namespaces, then the columns, then with -o wide the wide ones.
func (s *session) row(namespace string, columns, wide []string) []string {
	var out []string
	if s.allNamespaces {
		out = append(out, namespace)
	}
	out = append(out, columns...)
	if s.output == outputWide {
		out = append(out, wide...)
	}
	return out
}
