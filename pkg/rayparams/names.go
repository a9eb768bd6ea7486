package rayparams

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
)

// Labels KubeRay puts on what it creates, so that kubectl selectors written for KubeRay work unchanged.
const (
	// LabelCluster names a Ray Pod's (or a Service's, a Job's) RayCluster; a RayJob's
	// spec.clusterSelector names an existing cluster under this key too.
	LabelCluster = "ray.io/cluster"
	// LabelNodeType is "head" or "worker" (or "redis-cleanup") on a Ray Pod.
	LabelNodeType = "ray.io/node-type"
	// LabelGroup is a Ray Pod's group: HeadGroup, or its worker group's name.
	LabelGroup = "ray.io/group"
	// LabelIsRayNode is "yes" on every Ray Pod.
	LabelIsRayNode = "ray.io/is-ray-node"
	// LabelIdentifier is `<cluster>-<node type>` (through CheckLabel) on a Ray Pod and the head Service.
	LabelIdentifier = "ray.io/identifier"
	// LabelOriginatedCRD is the kind (OriginRayJob, OriginRayService) of the custom resource a RayCluster,
	// Service or submitter Job was made for.
	LabelOriginatedCRD = "ray.io/originated-from-crd"
	// LabelOriginName names the custom resource (RayJob, RayService) a RayCluster, Service or submitter
	// Job was made for.
	LabelOriginName = "ray.io/originated-from-cr-name"
	// LabelAppName is AppName on what KubeRay makes.
	LabelAppName = "app.kubernetes.io/name"
	// LabelCreatedBy is CreatedBy on what KubeRay makes (the optional Job cache selector matches it).
	LabelCreatedBy = "app.kubernetes.io/created-by"

	// KubeRay v1.7's multi-host indexing (RayMultiHostIndexing, on by default): every worker Pod
	// carries its replica's index within its group (0, 1, … the lowest free one); in a group of
	// numOfHosts > 1 a replica is numOfHosts Pods that also carry the replica's name (`<group>-xxxxx`,
	// unique across clusters) and their host index within it (0 … numOfHosts-1).
	LabelReplicaIndex = "ray.io/worker-group-replica-index"
	// LabelReplicaName names a multi-host worker's replica (see LabelReplicaIndex).
	LabelReplicaName = "ray.io/worker-group-replica-name"
	// LabelHostIndex is a multi-host worker's index within its replica (see LabelReplicaIndex).
	LabelHostIndex = "ray.io/replica-host-index"
	// LabelHeadlessWorkerService names the cluster on its headless worker Service
	// (`<cluster>-headless`), made for clusters with a multi-host group.
	LabelHeadlessWorkerService = "ray.io/headless-worker-svc"
	// LabelServe selects, with "true", the Pods a RayService's serve Service sends traffic to.
	LabelServe = "ray.io/serve"
	// LabelSubmissionMode is the label a RayJob's RayCluster carries with the job's submission mode.
	LabelSubmissionMode = "ray.io/job-submission-mode"
	// LabelCronJobName names the RayCronJob that created a RayJob.
	LabelCronJobName = "ray.io/cronjob-name"
)

// Label values KubeRay uses.
const (
	// AppName and CreatedBy are the values of LabelAppName and LabelCreatedBy.
	AppName = "kuberay"
	// CreatedBy is the value of LabelCreatedBy.
	CreatedBy = "kuberay-operator"
	// HeadGroup is the ray.io/group of the head Pod.
	HeadGroup = "headgroup"
	// OriginRayJob and OriginRayService are the LabelOriginatedCRD values of what a RayJob or a
	// RayService made.
	OriginRayJob = "RayJob"
	// OriginRayService is the LabelOriginatedCRD value of what a RayService made.
	OriginRayService = "RayService"
	// ManagedByKubeRay is the spec.managedBy value (besides empty) KubeRay's controllers act on; any
	// other value means an external controller owns the object.
	ManagedByKubeRay = "ray.io/kuberay-operator"
)

// Annotations and finalizers KubeRay reads or writes.
const (
	// AnnotationOverwriteCmd ("true") keeps the Ray container's command as the user wrote it.
	AnnotationOverwriteCmd = "ray.io/overwrite-container-cmd"
	// AnnotationFTEnabled records on the head Pod whether GCS fault tolerance is on; on a RayCluster,
	// "true" is the older way of turning it on.
	AnnotationFTEnabled = "ray.io/ft-enabled"
	// AnnotationExternalStorageNS names the head's storage namespace in Redis (on the head Pod; on the
	// RayCluster it is the older way of choosing it).
	AnnotationExternalStorageNS = "ray.io/external-storage-namespace"
	// AnnotationGCSFTDeletionTimeout (whole seconds) overrides how long a deleted fault-tolerant
	// RayCluster waits for its Redis cleanup before its finalizer is removed regardless.
	AnnotationGCSFTDeletionTimeout = "ray.io/gcs-ft-deletion-timeout"
	// AnnotationClusterHash is the hash of the RayCluster spec (without replica counts) a RayService's
	// cluster was made from.
	AnnotationClusterHash = "ray.io/hash-without-replicas-and-workers-to-delete"
	// AnnotationNumWorkerGroups is the number of worker groups a RayService's cluster was made with.
	AnnotationNumWorkerGroups = "ray.io/num-worker-groups"
	// AnnotationCronJobScheduledTimestamp is the scheduled time (RFC 3339, UTC) a RayCronJob's RayJob
	// was created for.
	AnnotationCronJobScheduledTimestamp = "ray.io/cronjob-scheduled-timestamp"

	// FinalizerRayJob lets the RayJob controller stop the Ray job before the RayJob goes away.
	FinalizerRayJob = "ray.io/rayjob-finalizer"
	// FinalizerRedisCleanup holds a fault-tolerant RayCluster until its Redis cleanup Job has finished.
	FinalizerRedisCleanup = "ray.io/gcs-ft-redis-cleanup-finalizer"
)

// Ports of a Ray head: KubeRay's names for them and the defaults when the head container names none.
const (
	// GCSPortName is the head's GCS port (workers connect to it).
	GCSPortName = "gcs-server"
	// DashboardPortName is the head container port (and head Service port) of the dashboard.
	DashboardPortName = "dashboard"
	// ClientPortName is Ray Client's port.
	ClientPortName = "client"
	// MetricsPortName is the port of Ray's metrics.
	MetricsPortName = "metrics"
	// ServingPortName is the head container port of Serve's HTTP proxy.
	ServingPortName = "serve"

	// DefaultGCSPort is the GCS port.
	DefaultGCSPort = 6379
	// DefaultDashboardPort is the dashboard's port.
	DefaultDashboardPort = 8265
	// DefaultClientPort is Ray Client's port.
	DefaultClientPort = 10001
	// DefaultMetricsPort is the metrics port.
	DefaultMetricsPort = 8080
	// DefaultServingPort is Serve's HTTP port.
	DefaultServingPort = 8000
	// DefaultDashboardAgentPort is the dashboard agent's port.
	DefaultDashboardAgentPort = 52365
)

// DefaultClusterDomain is the DNS domain of Services.
const DefaultClusterDomain = "cluster.local"

// SubmitterContainerName is the RayJob submitter's container, in the submitter Job (K8sJobMode) or in
// the head Pod (SidecarMode).
const SubmitterContainerName = "ray-job-submitter"

// HeadServiceName is the name the RayCluster controller gives a cluster's head Service, from its spec
// alone: spec.headGroupSpec.headService.metadata.name if set, else `<cluster>-head-svc`. Callers with a
// live cluster want CurrentHeadServiceName.
func HeadServiceName(c *rayv1.RayCluster) string {
	if hs := c.Spec.HeadGroupSpec.HeadService; hs != nil && hs.Name != "" {
		return hs.Name
	}
	return OwnedHeadServiceName(c.Name)
}

// CurrentHeadServiceName is the head Service a live cluster has: the one its status names
// (status.head.serviceName, written by the RayCluster controller), else the one HeadServiceName says it
// will have.
func CurrentHeadServiceName(c *rayv1.RayCluster) string {
	if c.Status.Head.ServiceName != "" {
		return c.Status.Head.ServiceName
	}
	return HeadServiceName(c)
}

// OwnedHeadServiceName is `<owner>-head-svc`: the head Service of a RayCluster named owner, and the one
// a RayJob or RayService named owner keeps for its current cluster, stable across the clusters it makes.
func OwnedHeadServiceName(owner string) string { return owner + "-head-svc" }

// HeadContainer returns the Ray container of the head template (KubeRay's: the first), or nil.
func HeadContainer(spec *rayv1.RayClusterSpec) *corev1.Container {
	if spec == nil || len(spec.HeadGroupSpec.Template.Spec.Containers) == 0 {
		return nil
	}
	return &spec.HeadGroupSpec.Template.Spec.Containers[0]
}

// HeadContainerPort is the head container's port called name, or def when it names none.
func HeadContainerPort(spec *rayv1.RayClusterSpec, name string, def int32) int32 {
	if c := HeadContainer(spec); c != nil {
		for _, p := range c.Ports {
			if p.Name == name {
				return p.ContainerPort
			}
		}
	}
	return def
}

// DashboardPort is the head container's dashboard port.
func DashboardPort(spec *rayv1.RayClusterSpec) int32 {
	return HeadContainerPort(spec, DashboardPortName, DefaultDashboardPort)
}

// HeadServicePorts are the head Service's ports by name: the head container's (an unnamed one as
// "<n>-port"), or KubeRay's defaults if it declares none, always with a metrics port.
func HeadServicePorts(spec *rayv1.RayClusterSpec) map[string]int32 {
	ports := map[string]int32{}
	if c := HeadContainer(spec); c != nil {
		for _, p := range c.Ports {
			name := p.Name
			if name == "" {
				name = strconv.Itoa(int(p.ContainerPort)) + "-port"
			}
			ports[name] = p.ContainerPort
		}
	}
	if len(ports) == 0 {
		ports = map[string]int32{
			ClientPortName:    DefaultClientPort,
			GCSPortName:       DefaultGCSPort,
			DashboardPortName: DefaultDashboardPort,
			MetricsPortName:   DefaultMetricsPort,
			ServingPortName:   DefaultServingPort,
		}
	}
	if _, ok := ports[MetricsPortName]; !ok {
		ports[MetricsPortName] = DefaultMetricsPort
	}
	return ports
}

// CheckLabel keeps a label value within 63 characters (dropping the front) and makes it start with an
// alphanumeric, as KubeRay does for the values it derives from names.
func CheckLabel(s string) string {
	if len(s) > 63 {
		s = s[len(s)-63:]
	}
	if s != "" && strings.ContainsRune("-_.", rune(s[0])) {
		s = "r" + s[1:]
	}
	return s
}
