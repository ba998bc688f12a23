package crds

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ObjectReference points an Event at one of this package's objects of the given kind.
func ObjectReference(kind string, obj metav1.Object) *corev1.ObjectReference {
	return &corev1.ObjectReference{
		APIVersion: GroupVersion.String(), Kind: kind,
		Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID(),
	}
}
