// Package kuberay17 declares the ray.io/v1 fields KubeRay v1.7 added to the API after v1.6.2, the newest
// ray-operator module the Go module proxy serves in full (v1.7.0's source archive is not served).
//
// It is input for controller-gen only (hack/generate.sh): the CRDs generated from these declarations
// are merged into the ones generated from KubeRay v1.6.2's types (hack/crdmerge), so that the served
// CRDs accept every field KubeRay v1.7 defines. Field names, JSON types, enums, defaults and
// validations follow KubeRay v1.7's published API; the declarations are rayctl's own. A type here
// holds only what v1.7 added (and, to reach it, the path from the object's root, each step with the
// requiredness it has upstream); rayctl's controllers still read the objects with v1.6.2's Go types
// and report the v1.7 fields they do not act on (pkg/controllers/unsupported).
//
// +groupName=ray.io
// +versionName=v1
package kuberay17

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RayCluster carries v1.7's additions to RayCluster.
//
// +kubebuilder:object:root=true
type RayCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec holds the additions to the cluster spec.
	Spec RayClusterSpec `json:"spec,omitempty"`
}

// RayClusterSpec lists v1.7's new fields of a cluster spec (RayCluster.spec, RayJob.spec.rayClusterSpec,
// RayService.spec.rayClusterConfig, RayCronJob.spec.jobTemplate.rayClusterSpec).
type RayClusterSpec struct {
	// HistoryServerOptions configures the collector that ships Ray's events to a history server.
	// +optional
	HistoryServerOptions *HistoryServerOptions `json:"historyServerOptions,omitempty"`
	// NetworkPolicy asks for NetworkPolicies isolating the cluster's pods.
	// +optional
	NetworkPolicy *NetworkPolicyConfig `json:"networkPolicy,omitempty"`
	// TLSOptions asks for TLS between Ray's components.
	// +optional
	TLSOptions *TLSOptions `json:"tlsOptions,omitempty"`
	// GcsFaultToleranceOptions gains a backend choice and embedded storage.
	// +optional
	GcsFaultToleranceOptions *GcsFaultToleranceOptions `json:"gcsFaultToleranceOptions,omitempty"`
	// HeadGroupSpec gains ingress options.
	HeadGroupSpec HeadGroupSpec `json:"headGroupSpec"`
	// WorkerGroupSpecs gain a priority.
	// +optional
	WorkerGroupSpecs []WorkerGroupSpec `json:"workerGroupSpecs,omitempty"`
	// AutoscalerOptions gain the autoscaler container's command and args.
	// +optional
	AutoscalerOptions *AutoscalerOptions `json:"autoscalerOptions,omitempty"`
}

// TLSOptions turns TLS between Ray's components on.
type TLSOptions struct {
	// Enabled turns TLS on.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
}

// GcsFaultToleranceBackend is where GCS state persists.
// +kubebuilder:validation:Enum=redis;rocksdb
type GcsFaultToleranceBackend string

// GcsFaultToleranceOptions are v1.7's additions to GCS fault tolerance; redisAddress becomes optional.
type GcsFaultToleranceOptions struct {
	// Backend selects Redis or an embedded RocksDB; it cannot change once set.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="gcsFaultToleranceOptions.backend is immutable"
	Backend GcsFaultToleranceBackend `json:"backend,omitempty"`
	// RedisAddress is needed only with the redis backend.
	// +optional
	RedisAddress string `json:"redisAddress,omitempty"`
	// Storage is the volume the rocksdb backend keeps GCS state on.
	// +optional
	Storage *GcsEmbeddedStorage `json:"storage,omitempty"`
}

// GCSStorageDeletionPolicy says what becomes of an operator-made GCS storage claim with its cluster.
// +kubebuilder:validation:Enum=DeleteWithCluster;Retain
type GCSStorageDeletionPolicy string

// GcsEmbeddedStorage is the claim behind the rocksdb backend.
type GcsEmbeddedStorage struct {
	// ClaimName names an existing claim; empty asks the operator to make one.
	// +optional
	ClaimName string `json:"claimName,omitempty"`
	// Size of a claim the operator makes.
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`
	// StorageClassName of a claim the operator makes.
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`
	// AccessModes of a claim the operator makes.
	// +optional
	AccessModes []corev1.PersistentVolumeAccessMode `json:"accessModes,omitempty"`
	// SubPath inside the volume.
	// +optional
	SubPath string `json:"subPath,omitempty"`
	// DeletionPolicy of a claim the operator makes.
	// +optional
	DeletionPolicy *GCSStorageDeletionPolicy `json:"deletionPolicy,omitempty"`
}

// HistoryServerOptions configures the history server's event collector.
type HistoryServerOptions struct {
	// CollectorOptions shape the collector sidecar.
	// +optional
	CollectorOptions *CollectorOptions `json:"collectorOptions,omitempty"`
}

// CollectorOptions shape the collector sidecar's container.
type CollectorOptions struct {
	// Image of the collector.
	// +optional
	Image *string `json:"image,omitempty"`
	// ImagePullPolicy of the collector.
	// +optional
	ImagePullPolicy *corev1.PullPolicy `json:"imagePullPolicy,omitempty"`
	// Resources of the collector.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
	// Env of the collector.
	// +optional
	Env []corev1.EnvVar `json:"env,omitempty"`
}

// NetworkPolicyMode is the isolation asked for.
// +kubebuilder:validation:Enum=DenyAll;DenyAllIngress;DenyAllEgress
type NetworkPolicyMode string

// NetworkPolicyConfig asks for NetworkPolicies around the cluster's pods.
type NetworkPolicyConfig struct {
	// Mode of isolation.
	// +kubebuilder:default=DenyAll
	// +optional
	Mode *NetworkPolicyMode `json:"mode,omitempty"`
	// Head's extra rules.
	// +optional
	Head *NetworkPolicyRules `json:"head,omitempty"`
	// Worker's extra rules, for every group.
	// +optional
	Worker *NetworkPolicyRules `json:"worker,omitempty"`
	// WorkerGroups' extra rules, by group.
	// +optional
	WorkerGroups []WorkerGroupNetworkPolicyRules `json:"workerGroups,omitempty"`
}

// WorkerGroupNetworkPolicyRules are rules for one worker group.
type WorkerGroupNetworkPolicyRules struct {
	// GroupName of the worker group.
	// +kubebuilder:validation:Required
	GroupName string `json:"groupName"`
	// NetworkPolicyRules for the group.
	NetworkPolicyRules `json:",inline"`
}

// NetworkPolicyRules are NetworkPolicy rules added to the generated policy.
type NetworkPolicyRules struct {
	// IngressRules added.
	// +optional
	IngressRules []networkingv1.NetworkPolicyIngressRule `json:"ingressRules,omitempty"`
	// EgressRules added.
	// +optional
	EgressRules []networkingv1.NetworkPolicyEgressRule `json:"egressRules,omitempty"`
}

// HeadGroupSpec gains ingress options.
type HeadGroupSpec struct {
	// IngressOptions shape the head's Ingress.
	// +optional
	IngressOptions *IngressOptions `json:"ingressOptions,omitempty"`
}

// IngressPathType is an Ingress path's match type.
// +kubebuilder:validation:Enum=Exact;Prefix;ImplementationSpecific
type IngressPathType string

// IngressOptions shape the head's Ingress.
type IngressOptions struct {
	// Host of the rule.
	// +optional
	Host *string `json:"host,omitempty"`
	// Path of the rule.
	// +optional
	Path *string `json:"path,omitempty"`
	// PathType of the rule.
	// +optional
	PathType *IngressPathType `json:"pathType,omitempty"`
	// TLS of the Ingress.
	// +optional
	TLS []networkingv1.IngressTLS `json:"tls,omitempty"`
}

// WorkerGroupSpec gains a priority.
type WorkerGroupSpec struct {
	// Priority orders groups for scaling.
	// +kubebuilder:default:=0
	// +optional
	Priority *int32 `json:"priority,omitempty"`
}

// AutoscalerOptions gain the container's command and args.
type AutoscalerOptions struct {
	// Command of the autoscaler container.
	// +optional
	Command []string `json:"command,omitempty"`
	// Args of the autoscaler container.
	// +optional
	Args []string `json:"args,omitempty"`
}

// RayJob carries v1.7's additions to RayJob.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
type RayJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec holds the additions to the job spec.
	Spec RayJobSpec `json:"spec,omitempty"`
	// Status holds the additions to the job status.
	Status RayJobStatus `json:"status,omitempty"`
}

// RayJobSpec reaches the cluster spec a RayJob embeds.
type RayJobSpec struct {
	// RayClusterSpec gains v1.7's cluster fields.
	// +optional
	RayClusterSpec *RayClusterSpec `json:"rayClusterSpec,omitempty"`
}

// RayJobStatus gains when status checks began failing.
type RayJobStatus struct {
	// JobStatusCheckFailureStartTime is when the dashboard's job status checks began failing.
	// +optional
	JobStatusCheckFailureStartTime *metav1.Time `json:"jobStatusCheckFailureStartTime,omitempty"`
}

// RayService carries v1.7's additions to RayService.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
type RayService struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec holds the additions to the service spec.
	Spec RayServiceSpec `json:"spec,omitempty"`
}

// RayServiceSpec gains suspend and reaches the cluster config.
type RayServiceSpec struct {
	// Suspend deletes what the RayService made while true.
	// +optional
	Suspend bool `json:"suspend,omitempty"`
	// RayClusterSpec gains v1.7's cluster fields.
	RayClusterSpec RayClusterSpec `json:"rayClusterConfig"`
}

// RayCronJob carries v1.7's additions to RayCronJob, and its printer columns.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="schedule",type=string,JSONPath=".spec.schedule",priority=0
// +kubebuilder:printcolumn:name="timezone",type=string,JSONPath=".spec.timeZone",priority=0
// +kubebuilder:printcolumn:name="last schedule",type=date,JSONPath=".status.lastScheduleTime",priority=0
// +kubebuilder:printcolumn:name="age",type="date",JSONPath=".metadata.creationTimestamp",priority=0
// +kubebuilder:printcolumn:name="suspend",type=boolean,JSONPath=".spec.suspend",priority=0
type RayCronJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec holds the additions to the cron job spec.
	Spec RayCronJobSpec `json:"spec,omitempty"`
}

// RayCronJobSpec gains a time zone and reaches the job template's cluster spec.
type RayCronJobSpec struct {
	// TimeZone the schedule is read in (an IANA name).
	// +kubebuilder:validation:MinLength=1
	// +optional
	TimeZone *string `json:"timeZone,omitempty"`
	// JobTemplate's cluster spec gains v1.7's cluster fields.
	JobTemplate RayJobSpec `json:"jobTemplate"`
}
