package crds

import (
	"errors"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/configbutler/gitops-reverser/kube"
)

// ToUnstructured converts obj (a struct or pointer to one) for the dynamic client. For the
// kinds of this package an empty apiVersion/kind is filled in, so callers need not set
// TypeMeta by hand.
func ToUnstructured(obj any) (*unstructured.Unstructured, error) {
	if obj == nil {
		return nil, errors.New("convert nil to unstructured")
	}
	ptr := obj
	if v := reflect.ValueOf(obj); v.Kind() != reflect.Pointer {
		// The converter wants a pointer; accept values too, as json.Marshal does.
		p := reflect.New(v.Type())
		p.Elem().Set(v)
		ptr = p.Interface()
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ptr)
	if err != nil {
		return nil, fmt.Errorf("convert %T to unstructured: %w", obj, err)
	}
	u := &unstructured.Unstructured{Object: m}
	if kind := kindOf(obj); kind != "" {
		if u.GetAPIVersion() == "" {
			u.SetAPIVersion(GroupVersion.String())
		}
		if u.GetKind() == "" {
			u.SetKind(kind)
		}
	}
	return u, nil
}

// FromUnstructured converts u into a new T. Fields T does not know are ignored.
func FromUnstructured[T any](u *unstructured.Unstructured) (*T, error) {
	return kube.Convert[T](u)
}

func kindOf(obj any) string {
	switch obj.(type) {
	case GitRepoConfig, *GitRepoConfig:
		return KindGitRepoConfig
	case GitDestination, *GitDestination:
		return KindGitDestination
	case WatchRule, *WatchRule:
		return KindWatchRule
	case ClusterWatchRule, *ClusterWatchRule:
		return KindClusterWatchRule
	case Proposal, *Proposal:
		return KindProposal
	case SyncRun, *SyncRun:
		return KindSyncRun
	case Receiver, *Receiver:
		return KindReceiver
	case RemoteCluster, *RemoteCluster:
		return KindRemoteCluster
	case NotifyChannel, *NotifyChannel:
		return KindNotifyChannel
	case NotifyRule, *NotifyRule:
		return KindNotifyRule
	}
	return ""
}
