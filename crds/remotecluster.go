package crds

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// KindRemoteCluster is a cluster other than the daemon's own that GitDestinations may mirror.
const KindRemoteCluster = "RemoteCluster"

// RemoteClusters is the resource of KindRemoteCluster.
var RemoteClusters = GroupVersion.WithResource("remoteclusters")

// DefaultKubeConfigKey is the key of a kubeconfig Secret that Cluster API writes
// (<cluster>-kubeconfig) and Flux reads first; KubeConfigKeyYAML is Flux's second choice.
const (
	DefaultKubeConfigKey = "value"
	KubeConfigKeyYAML    = "value.yaml"
)

// AllNamespaces in RemoteClusterSpec.Namespaces lets the cluster's every namespace be mirrored.
const AllNamespaces = "*"

// RemoteCluster is a Kubernetes cluster the daemon reaches with a kubeconfig kept in a Secret of
// the same namespace, and what of it may be mirrored. It is namespaced, as GitRepoConfig is: the
// kubeconfig is a credential of whoever keeps that namespace, and other namespaces use the
// cluster only with its consent (spec.accessPolicy).
type RemoteCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   RemoteClusterSpec   `json:"spec"`
	Status RemoteClusterStatus `json:"status,omitzero"`
}

// RemoteClusterSpec is the desired state of a RemoteCluster.
type RemoteClusterSpec struct {
	// KubeConfig names the Secret that holds the kubeconfig.
	KubeConfig KubeConfigReference `json:"kubeConfig"`
	// Namespaces of the cluster that may be mirrored, by name, or AllNamespaces; none by default.
	Namespaces []string `json:"namespaces,omitempty"`
	// ClusterScoped lets cluster-scoped resources (namespaces, ClusterRoles…) be mirrored.
	ClusterScoped bool `json:"clusterScoped,omitempty"`
	// QPS and Burst bound the daemon's requests to the cluster; zero is the default.
	QPS   int32 `json:"qps,omitempty"`
	Burst int32 `json:"burst,omitempty"`
	// AccessPolicy admits GitDestinations of other namespaces; nil admits only this namespace.
	AccessPolicy *AccessPolicy `json:"accessPolicy,omitempty"`
	// SharedIdentities says the cluster's users and groups are the hub's (one identity provider,
	// the same names): an approver of a write-back to the cluster is then asked about there under
	// their own name and groups. False, they are asked about under HubUserPrefix.
	SharedIdentities bool `json:"sharedIdentities,omitempty"`
}

// HubUserPrefix is put before the name and each group of a hub user whose approval is checked in
// a RemoteCluster that does not share the hub's identities: hub:alice in hub:developers. No
// cluster's own users or groups bear it (they never start with "hub:" unless its authenticators
// say so), so a hub user named like a remote admin gets none of the admin's rights there; that
// cluster grants hub users what they may approve by binding these names.
const HubUserPrefix = "hub:"

// KubeConfigReference names a Secret of the RemoteCluster's namespace and its key.
type KubeConfigReference struct {
	SecretRef SecretKeyReference `json:"secretRef"`
}

// SecretKeyReference names a Secret in the referring object's namespace and one of its keys;
// an empty Key is DefaultKubeConfigKey, then KubeConfigKeyYAML.
type SecretKeyReference struct {
	Name string `json:"name"`
	Key  string `json:"key,omitempty"`
}

// RemoteClusterStatus is what the daemon last saw of the cluster.
type RemoteClusterStatus struct {
	Status `json:",inline"`
	// Server is the apiserver's URL, from the kubeconfig.
	Server string `json:"server,omitempty"`
	// Version is the cluster's Kubernetes version, as discovery tells it.
	Version string `json:"version,omitempty"`
	// Resources is how many resources discovery found.
	Resources int `json:"resources,omitempty"`
	// Watches is how many list+watches the rules ask of the cluster: one per resource and
	// namespace they select there, whichever replica runs it.
	Watches int `json:"watches,omitempty"`
	// LastEventTime is when a watch of the cluster last delivered a change (not a list), as the
	// replica that writes the status saw it.
	LastEventTime *metav1.Time `json:"lastEventTime,omitempty"`
	// Attribution says whether the cluster's apiserver calls the daemon's admission webhook.
	Attribution string `json:"attribution,omitempty"`
}

// The values of RemoteClusterStatus.Attribution.
const (
	AttributionOff        = "Off"        // the daemon's webhook is not enabled
	AttributionRegistered = "Registered" // registered; no review seen yet
	AttributionWorking    = "Working"    // the cluster's apiserver calls the webhook
	AttributionFailing    = "Failing"    // registration failed, or no review although changes were seen
)
