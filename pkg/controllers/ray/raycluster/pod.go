package raycluster

import (
	"fmt"
	"maps"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/rayctl/rayctl/pkg/rayparams"
	"github.com/rayctl/rayctl/pkg/rayports"
)

// Names of what the controller adds to Ray Pods.
const (
	// KubeRayVersion is the KubeRay release whose behaviour this controller follows.
	KubeRayVersion = "v1.5.0"

	sharedMemoryVolume = "shared-mem"
	sharedMemoryPath   = "/dev/shm"
	initContainerName  = "wait-gcs-ready"
)

// Probe timings. KubeRay injects the same exec probes; only the readiness probe's timing differs.
// KubeRay waits 10 s before the first readiness check and then checks every 5 s, so no cluster can be
// ready sooner than ~10 s — made for Ray's own start-up on a cloud node. On a laptop (and with raysim,
// which is serving within a second) that wait is most of the time to a ready cluster, so the first check
// comes after 1 s and then every second: a real Ray head serves 3–4 s after it starts, and a check
// every 2 s let it wait a second more, on average, before the RayJob's submitter could start (suite
// rayvsplain measured it). The failure threshold grows to 50 so that a Pod still has to fail for the
// same ~50 s as under KubeRay before it counts as not ready. Liveness keeps KubeRay's timing:
// with 120 failures allowed, an earlier first check would change nothing.
const (
	readinessInitialDelay = ReadinessInitialDelay
	readinessPeriod       = ReadinessPeriod
	readinessFailures     = 50
	readinessTimeout      = 2 // head: 5, as KubeRay (it queries two endpoints)
	livenessInitialDelay  = 30
	livenessPeriod        = 5
	livenessFailures      = 120
	livenessTimeout       = 2 // head: 5
	headProbeTimeout      = 5
	// gcsWaitInterval is how often the workers' wait-gcs-ready init container retries (KubeRay: 5 s).
	// One second gets a worker going almost as soon as the head answers.
	gcsWaitInterval = 1
)

// ReadinessInitialDelay and ReadinessPeriod are the injected readiness probe's first check and period,
// in seconds (KubeRay: 10 and 5; see the probe timings above).
const (
	ReadinessInitialDelay = 1
	ReadinessPeriod       = 1
)

// BuildOptions are the cluster-wide knobs KubeRay reads from its own environment.
type BuildOptions struct {
	// ClusterDomain is the DNS domain of Services (KubeRay's CLUSTER_DOMAIN); "" means cluster.local.
	ClusterDomain string
	// NoInitContainer leaves out the workers' wait-gcs-ready init container (ENABLE_INIT_CONTAINER_INJECTION=false).
	NoInitContainer bool
	// NoProbes leaves out the injected liveness and readiness probes (ENABLE_PROBES_INJECTION=false).
	NoProbes bool
	// Ports, when set, puts the Pod's Ray on blocks of ports of the host's loopback: the node's pods
	// share the host's network (rayports). It is the Pod's own plan, set per Pod.
	Ports *PortPlan
	// Replica, when set, is a worker Pod's place in its group (multi-host indexing), set per Pod.
	Replica *ReplicaSlot
}

// ReplicaSlot is a worker Pod's place in its group: its replica's index and, in a group of
// numOfHosts > 1, the replica's name and the Pod's host index within it.
type ReplicaSlot struct {
	Index int
	Name  string
	Host  int
}

// PortPlan is where a Pod's Ray listens when pods share the host's network: Own is its block, Head the
// block of its cluster's head (the same for the head), whose GCS a worker joins on 127.0.0.1.
type PortPlan struct {
	Own, Head rayports.Block
}

// headAddress is the host and GCS port workers reach the head at: the head Service's DNS name and
// rayStartParams.port (else 6379), or 127.0.0.1 and the head's block when pods share the host's network.
func (o BuildOptions) headAddress(c *rayv1.RayCluster) (host, port string) {
	if o.Ports != nil {
		h, p, _ := net.SplitHostPort(rayports.HeadAddress(o.Ports.Head))
		return h, p
	}
	return HeadFQDN(c, o), headPort(c)
}

func (o BuildOptions) domain() string {
	if o.ClusterDomain == "" {
		return "cluster.local"
	}
	return o.ClusterDomain
}

// HeadFQDN is the fully qualified name workers reach the head at: `<head-svc>.<ns>.svc.<domain>`.
func HeadFQDN(c *rayv1.RayCluster, o BuildOptions) string {
	return fmt.Sprintf("%s.%s.svc.%s", rayparams.HeadServiceName(c), c.Namespace, o.domain())
}

// headPort is the GCS port workers connect to: rayStartParams.port, else 6379.
func headPort(c *rayv1.RayCluster) string {
	if p, ok := c.Spec.HeadGroupSpec.RayStartParams["port"]; ok {
		return p
	}
	return strconv.Itoa(rayparams.DefaultGCSPort)
}

// HeadPod returns the head Pod KubeRay would create for c (named by generateName `<cluster>-head-`).
// It does not modify c.
func HeadPod(c *rayv1.RayCluster, o BuildOptions) *corev1.Pod {
	g := c.Spec.HeadGroupSpec
	tmpl := g.Template.DeepCopy()
	tmpl.Name = ""
	tmpl.GenerateName = podGenerateName(c.Name, rayv1.HeadNode)
	tmpl.Namespace = c.Namespace
	params := maps.Clone(g.RayStartParams)
	if params == nil {
		params = map[string]string{}
	}
	rayparams.ApplyGroupResources(params, g.Resources)
	applyGroupLabels(params, g.Labels)
	tmpl.Labels = podLabels(rayv1.HeadNode, c.Name, rayparams.HeadGroup, merged(g.Template.Labels, g.Labels))
	if _, ok := params["dashboard-host"]; !ok {
		params["dashboard-host"] = "0.0.0.0"
	}
	setCommonParams(params)
	annotate(c, tmpl)
	configureHeadGCSFaultTolerance(c, tmpl, params)
	if AutoscalingEnabled(c) {
		addAutoscaler(c, tmpl, params)
	}
	addMetricsPort(&tmpl.Spec.Containers[0])
	o.placePorts(tmpl, params, rayv1.HeadNode)
	return buildPod(c, tmpl, rayv1.HeadNode, params, o)
}

// WorkerPod returns a worker Pod of group g KubeRay would create for c (generateName
// `<cluster>-<group>-worker-`). It does not modify c.
func WorkerPod(c *rayv1.RayCluster, g *rayv1.WorkerGroupSpec, o BuildOptions) *corev1.Pod {
	tmpl := g.Template.DeepCopy()
	tmpl.Name = ""
	tmpl.GenerateName = podGenerateName(c.Name+"-"+g.GroupName, rayv1.WorkerNode)
	tmpl.Namespace = c.Namespace
	fqdn, port := o.headAddress(c)
	if !o.NoInitContainer {
		tmpl.Spec.InitContainers = append(tmpl.Spec.InitContainers, waitGCSContainer(&tmpl.Spec.Containers[0], fqdn, port))
	}
	params := maps.Clone(g.RayStartParams)
	if params == nil {
		params = map[string]string{}
	}
	rayparams.ApplyGroupResources(params, g.Resources)
	applyGroupLabels(params, g.Labels)
	tmpl.Labels = podLabels(rayv1.WorkerNode, c.Name, g.GroupName, merged(g.Template.Labels, g.Labels))
	if s := o.Replica; s != nil {
		tmpl.Labels[rayparams.LabelReplicaIndex] = strconv.Itoa(s.Index)
		if numOfHosts(g) > 1 {
			tmpl.Labels[rayparams.LabelReplicaName] = s.Name
			tmpl.Labels[rayparams.LabelHostIndex] = strconv.Itoa(s.Host)
		}
	}
	if _, ok := params["address"]; !ok {
		params["address"] = fqdn + ":" + port
	}
	setCommonParams(params)
	annotate(c, tmpl)
	configureWorkerGCSFaultTolerance(c, tmpl)
	if autoscalerV2(c) {
		tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
	}
	addMetricsPort(&tmpl.Spec.Containers[0])
	o.placePorts(tmpl, params, rayv1.WorkerNode)
	return buildPod(c, tmpl, rayv1.WorkerNode, params, o)
}

// placePorts puts the Pod's Ray on its blocks when o.Ports is set (pods share the host's network):
// `ray start`'s port flags and 127.0.0.1 (over rayStartParams: there, only its block is the Pod's); the
// Ray container's ports that Ray's listeners use (KubeRay's defaults, or rayStartParams' numbers) moved
// into the block, so that the head Service's target ports and port-forwards find them; the block
// recorded in the Pod's rayports.Annotation.
func (o BuildOptions) placePorts(tmpl *corev1.PodTemplateSpec, params map[string]string, t rayv1.RayNodeType) {
	if o.Ports == nil {
		return
	}
	ray := &tmpl.Spec.Containers[0]
	roles := portRoles(params)
	for i := range ray.Ports {
		if r, ok := roles[ray.Ports[i].ContainerPort]; ok {
			ray.Ports[i].ContainerPort = o.Ports.Own.Port(r)
		}
	}
	maps.Copy(params, rayports.Params(o.Ports.Own, o.Ports.Head, t == rayv1.HeadNode))
	if tmpl.Annotations == nil {
		tmpl.Annotations = map[string]string{}
	}
	tmpl.Annotations[rayports.Annotation] = o.Ports.Own.String()
}

// portRoles maps the ports Ray's listeners take by default (or as params set them) to their roles.
func portRoles(params map[string]string) map[int32]rayports.Role {
	return map[int32]rayports.Role{
		paramPort(params, "port", rayparams.DefaultGCSPort):                                   rayports.GCS,
		paramPort(params, "dashboard-port", rayparams.DefaultDashboardPort):                   rayports.Dashboard,
		paramPort(params, "ray-client-server-port", rayparams.DefaultClientPort):              rayports.Client,
		paramPort(params, "metrics-export-port", rayparams.DefaultMetricsPort):                rayports.Metrics,
		paramPort(params, "dashboard-agent-listen-port", rayparams.DefaultDashboardAgentPort): rayports.AgentListen,
		rayparams.DefaultServingPort:                                                          rayports.Serve,
	}
}

// shortHost is RAY_IP for a head reached at host: the Service's name (the first label of its DNS
// name), or host itself when it is an address.
func shortHost(host string) string {
	if net.ParseIP(host) != nil {
		return host
	}
	return strings.Split(host, ".")[0]
}

// paramPort is the port params[key] names, else def.
func paramPort(params map[string]string, key string, def int32) int32 {
	if n, err := strconv.ParseInt(params[key], 10, 32); err == nil && n > 0 {
		return int32(n)
	}
	return def
}

// waitGCSContainer is the init container that holds a worker back until the head's GCS answers.
func waitGCSContainer(ray *corev1.Container, fqdn, port string) corev1.Container {
	script := fmt.Sprintf(`
SECONDS=0
while true; do
	if (( SECONDS <= 120 )); then
		if ray health-check --address %[1]s:%[2]s > /dev/null 2>&1; then
			echo "GCS is ready."
			break
		fi
		echo "$SECONDS seconds elapsed: Waiting for GCS to be ready."
	else
		if ray health-check --address %[1]s:%[2]s; then
			echo "GCS is ready. Any error messages above can be safely ignored."
			break
		fi
		echo "$SECONDS seconds elapsed: Still waiting for GCS to be ready. For troubleshooting, refer to the FAQ at https://docs.ray.io/en/master/cluster/kubernetes/troubleshooting.html."
	fi
	sleep %[3]d
done
`, fqdn, port, gcsWaitInterval)
	fixed := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("256Mi")}
	return corev1.Container{
		Name:            initContainerName,
		Image:           ray.Image,
		ImagePullPolicy: ray.ImagePullPolicy,
		Command:         shellCommand(),
		Args:            []string{script},
		SecurityContext: ray.SecurityContext.DeepCopy(),
		// TLS settings of the Ray container may live in env and volumes; the health check needs them too.
		Env:          slices.Clone(ray.Env),
		VolumeMounts: slices.Clone(ray.VolumeMounts),
		Resources:    corev1.ResourceRequirements{Limits: fixed, Requests: fixed.DeepCopy()},
	}
}

func shellCommand() []string { return []string{"/bin/bash", "-c", "--"} }

func merged(a, b map[string]string) map[string]string {
	m := map[string]string{}
	maps.Copy(m, a)
	maps.Copy(m, b)
	return m
}

// setCommonParams adds what KubeRay adds to every node's `ray start`.
func setCommonParams(params map[string]string) {
	if _, ok := params["metrics-export-port"]; !ok {
		params["metrics-export-port"] = strconv.Itoa(rayparams.DefaultMetricsPort)
	}
	params["block"] = "true"
	if _, ok := params["dashboard-agent-listen-port"]; !ok {
		params["dashboard-agent-listen-port"] = strconv.Itoa(rayparams.DefaultDashboardAgentPort)
	}
}

func annotate(c *rayv1.RayCluster, tmpl *corev1.PodTemplateSpec) {
	if tmpl.Annotations == nil {
		tmpl.Annotations = map[string]string{}
	}
	if overwriteCmd(c) {
		tmpl.Annotations[rayparams.AnnotationOverwriteCmd] = "true"
	}
}

func overwriteCmd(c *rayv1.RayCluster) bool {
	return strings.EqualFold(c.Annotations[rayparams.AnnotationOverwriteCmd], "true")
}

func addMetricsPort(ray *corev1.Container) {
	for _, p := range ray.Ports {
		if p.Name == rayparams.MetricsPortName {
			return
		}
	}
	ray.Ports = append(ray.Ports, corev1.ContainerPort{Name: rayparams.MetricsPortName, ContainerPort: rayparams.DefaultMetricsPort})
}

// buildPod finishes a head or worker Pod as KubeRay's BuildPod does: shared memory, the `ray start`
// command, environment, probes and the controller reference.
func buildPod(c *rayv1.RayCluster, tmpl *corev1.PodTemplateSpec, t rayv1.RayNodeType, params map[string]string, o BuildOptions) *corev1.Pod {
	pod := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: tmpl.ObjectMeta,
		Spec:       tmpl.Spec,
	}
	ray := &pod.Spec.Containers[0]
	addSharedMemory(pod, ray)
	if t == rayv1.HeadNode {
		addLogVolume(pod)
	}

	var userCmd string
	for _, s := range append(slices.Clone(ray.Command), ray.Args...) {
		userCmd += " " + s + " "
	}
	startCmd := rayStartCommand(t, params, ray.Resources)
	if !overwriteCmd(c) && !strings.Contains(userCmd, "ray start") {
		generated := "ulimit -n 65536; " + startCmd
		ray.Command = shellCommand()
		if userCmd != "" {
			// `ray start --block` never returns, so the user's command goes first.
			ray.Args = []string{userCmd + " && " + generated}
		} else {
			ray.Args = []string{generated}
		}
	}
	fqdn, port := o.headAddress(c)
	for i := range pod.Spec.InitContainers {
		pod.Spec.InitContainers[i].Env = append(pod.Spec.InitContainers[i].Env,
			corev1.EnvVar{Name: "FQ_RAY_IP", Value: fqdn},
			corev1.EnvVar{Name: "RAY_IP", Value: shortHost(fqdn)})
	}
	setEnv(c, ray, t, fqdn, port, startCmd)
	if TokenAuth(&c.Spec, o.Ports != nil) {
		secret := AuthSecretName(c.Name, &c.Spec)
		add := func(ctr *corev1.Container) { AddAuthEnv(ctr, secret) }
		if K8sTokenAuth(&c.Spec) {
			add = func(ctr *corev1.Container) { addK8sAuth(&pod.Spec, ctr) }
		}
		add(ray)
		for i := range pod.Spec.InitContainers {
			if pod.Spec.InitContainers[i].Name == initContainerName {
				add(&pod.Spec.InitContainers[i])
			}
		}
		for i := range pod.Spec.Containers {
			if pod.Spec.Containers[i].Name == AutoscalerContainerName {
				add(&pod.Spec.Containers[i])
			}
		}
	}
	serve := fromRayService(c)
	if serve {
		markServing(pod, ray, t)
	}
	if !o.NoProbes {
		agent, dashboard := int32(rayparams.DefaultDashboardAgentPort), int32(rayparams.DefaultDashboardPort)
		if o.Ports != nil {
			agent, dashboard = o.Ports.Own.Port(rayports.AgentListen), o.Ports.Own.Port(rayports.Dashboard)
		}
		setProbes(ray, t, serve, agent, dashboard)
	}
	pod.OwnerReferences = []metav1.OwnerReference{ownerRef(c)}
	return pod
}

// ownerRef is the controller reference every Pod and Service of c carries, so that Owns() maps their
// events back to c and the garbage collector deletes them with it.
func ownerRef(c *rayv1.RayCluster) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion:         rayv1.GroupVersion.String(),
		Kind:               "RayCluster",
		Name:               c.Name,
		UID:                c.UID,
		Controller:         ptr.To(true),
		BlockOwnerDeletion: ptr.To(true),
	}
}

// addSharedMemory mounts a memory-backed emptyDir at /dev/shm for Ray's object store (sized to the
// container's memory limit, else its request), unless something is mounted there already.
func addSharedMemory(pod *corev1.Pod, ray *corev1.Container) {
	var size *resource.Quantity
	if q, ok := ray.Resources.Limits[corev1.ResourceMemory]; ok {
		size = &q
	} else if q, ok := ray.Resources.Requests[corev1.ResourceMemory]; ok {
		size = &q
	}
	addEmptyDir(pod, ray, sharedMemoryVolume, sharedMemoryPath, corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: size})
}

// rayStartCommand is KubeRay's generated `ray start`: CPUs, memory, GPUs and a TPU or Neuron accelerator (a
// custom resource, rayparams.AddAcceleratorResource) from the container's
// resources unless rayStartParams say otherwise, then every param as --key=value (sorted; "true" is a
// bare flag and "false" omits it, except for the tri-state log-color and include-dashboard).
func rayStartCommand(t rayv1.RayNodeType, params map[string]string, res corev1.ResourceRequirements) string {
	if _, ok := params["num-cpus"]; !ok {
		if cpu := res.Limits[corev1.ResourceCPU]; !cpu.IsZero() {
			params["num-cpus"] = strconv.FormatInt(cpu.Value(), 10)
		} else if cpu := res.Requests[corev1.ResourceCPU]; !cpu.IsZero() {
			params["num-cpus"] = strconv.FormatInt(cpu.Value(), 10)
		}
	}
	if _, ok := params["memory"]; !ok {
		if mem := res.Limits[corev1.ResourceMemory]; !mem.IsZero() {
			params["memory"] = strconv.FormatInt(mem.Value(), 10)
		}
	}
	if _, ok := params["num-gpus"]; !ok {
		keys := make([]string, 0, len(res.Limits))
		for k := range res.Limits {
			keys = append(keys, string(k))
		}
		sort.Strings(keys)
		for _, k := range keys {
			if q := res.Limits[corev1.ResourceName(k)]; rayparams.IsGPU(k) && !q.IsZero() {
				params["num-gpus"] = strconv.FormatInt(q.Value(), 10)
				break
			}
		}
	}
	limits := map[string]resource.Quantity{}
	for k, q := range res.Limits {
		limits[string(k)] = q
	}
	rayparams.AddAcceleratorResource(params, limits)
	keys := slices.Sorted(maps.Keys(params))
	var b strings.Builder
	for _, k := range keys {
		v := params[k]
		if lv := strings.ToLower(v); (lv == "true" || lv == "false") && k != "log-color" && k != "include-dashboard" {
			if lv == "true" {
				fmt.Fprintf(&b, " --%s ", k)
			}
			continue
		}
		fmt.Fprintf(&b, " --%s=%s ", k, v)
	}
	if t == rayv1.HeadNode {
		return "ray start --head " + b.String()
	}
	return "ray start " + b.String()
}

// applyGroupLabels turns a group's top-level `labels` into `--labels k=v,…`.
func applyGroupLabels(params map[string]string, labels map[string]string) {
	if len(labels) == 0 {
		return
	}
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		kv = append(kv, k+"="+labels[k])
	}
	params["labels"] = strings.Join(kv, ",")
}

func hasEnv(env []corev1.EnvVar, name string) bool {
	return slices.ContainsFunc(env, func(e corev1.EnvVar) bool { return e.Name == name })
}

func fieldEnv(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
}

// setEnv adds KubeRay's environment to the Ray container.
func setEnv(c *rayv1.RayCluster, ray *corev1.Container, t rayv1.RayNodeType, fqdn, port, startCmd string) {
	ip := "127.0.0.1"
	if t == rayv1.WorkerNode {
		ip = fqdn
		ray.Env = append(ray.Env,
			corev1.EnvVar{Name: "FQ_RAY_IP", Value: fqdn},
			corev1.EnvVar{Name: "RAY_IP", Value: shortHost(fqdn)})
	}
	ray.Env = append(ray.Env,
		fieldEnv("RAY_CLUSTER_NAME", fmt.Sprintf("metadata.labels['%s']", rayparams.LabelCluster)),
		fieldEnv("RAY_CLUSTER_NAMESPACE", "metadata.namespace"),
		fieldEnv("RAY_CLOUD_INSTANCE_ID", "metadata.name"),
		fieldEnv("RAY_NODE_TYPE_NAME", fmt.Sprintf("metadata.labels['%s']", rayparams.LabelGroup)),
		corev1.EnvVar{Name: "KUBERAY_GEN_RAY_START_CMD", Value: startCmd},
	)
	add := func(name, value string) {
		if !hasEnv(ray.Env, name) {
			ray.Env = append(ray.Env, corev1.EnvVar{Name: name, Value: value})
		}
	}
	add("RAY_PORT", port)
	add("RAY_ADDRESS", ip+":"+port)
	add("RAY_USAGE_STATS_KUBERAY_IN_USE", "1")
	if t == rayv1.HeadNode {
		crd := c.Labels[rayparams.LabelOriginatedCRD]
		if crd == "" {
			crd = "RayCluster"
		}
		ray.Env = append(ray.Env, corev1.EnvVar{Name: "RAY_USAGE_STATS_EXTRA_TAGS",
			Value: fmt.Sprintf("kuberay_version=%s;kuberay_crd=%s", KubeRayVersion, crd)})
	}
	add("RAY_DASHBOARD_ENABLE_K8S_DISK_USAGE", "1")
}

// setProbes gives the Ray container KubeRay's exec probes, where the user set none: the head checks
// the raylet (through the dashboard agent) and the GCS (through the dashboard); a worker the raylet.
//
// A worker of a RayService's cluster is ready only when its Serve proxy answers too (serve), since the
// serve Service sends it traffic; the head's proxy is checked by the RayService controller instead.
func setProbes(ray *corev1.Container, t rayv1.RayNodeType, serve bool, agentPort, dashboardPort int32) {
	wget := "wget --tries 1 -T %d -q -O- http://localhost:%d/%s | grep success"
	cmds := []string{fmt.Sprintf(wget, readinessTimeout, agentPort, "api/local_raylet_healthz")}
	if t == rayv1.HeadNode {
		// KubeRay passes its readiness failure threshold (10) as this wget's timeout; kept as is.
		cmds = append(cmds, fmt.Sprintf(wget, 10, dashboardPort, "api/gcs_healthz"))
	}
	exec := &corev1.ExecAction{Command: []string{"bash", "-c", strings.Join(cmds, " && ")}}
	readyExec := exec
	if serve && t == rayv1.WorkerNode {
		// KubeRay waits its readiness probe's initial delay (10 s) as this wget's timeout; kept as is.
		proxy := fmt.Sprintf(wget, 10, servingPort(ray), "-/healthz")
		readyExec = &corev1.ExecAction{Command: []string{"bash", "-c", strings.Join(append(cmds, proxy), " && ")}}
	}
	live, ready := int32(livenessTimeout), int32(readinessTimeout)
	if t == rayv1.HeadNode {
		live, ready = headProbeTimeout, headProbeTimeout
	}
	if ray.LivenessProbe == nil {
		ray.LivenessProbe = &corev1.Probe{
			ProbeHandler:        corev1.ProbeHandler{Exec: exec.DeepCopy()},
			InitialDelaySeconds: livenessInitialDelay, TimeoutSeconds: live, PeriodSeconds: livenessPeriod,
			SuccessThreshold: 1, FailureThreshold: livenessFailures,
		}
	}
	if ray.ReadinessProbe == nil {
		ray.ReadinessProbe = &corev1.Probe{
			ProbeHandler:        corev1.ProbeHandler{Exec: readyExec.DeepCopy()},
			InitialDelaySeconds: readinessInitialDelay, TimeoutSeconds: ready, PeriodSeconds: readinessPeriod,
			SuccessThreshold: 1, FailureThreshold: readinessFailures,
		}
	}
}

// fromRayService reports whether a RayService made the cluster.
func fromRayService(c *rayv1.RayCluster) bool {
	return c.Labels[rayparams.LabelOriginatedCRD] == rayparams.OriginRayService
}

// markServing labels a RayService cluster's Pod for its serve Service, as KubeRay does: a worker
// "true" (its readiness probe checks its proxy), the head "false" until the RayService controller
// finds its proxy healthy. Tasks learn of a dead actor at once (RAY_TIMEOUT_MS_TASK_WAIT_FOR_DEATH_INFO=0).
func markServing(pod *corev1.Pod, ray *corev1.Container, t rayv1.RayNodeType) {
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[rayparams.LabelServe] = "true"
	if t == rayv1.HeadNode {
		pod.Labels[rayparams.LabelServe] = "false"
	}
	if !hasEnv(ray.Env, "RAY_TIMEOUT_MS_TASK_WAIT_FOR_DEATH_INFO") {
		ray.Env = append(ray.Env, corev1.EnvVar{Name: "RAY_TIMEOUT_MS_TASK_WAIT_FOR_DEATH_INFO", Value: "0"})
	}
}

// servingPort is the container's Serve port.
func servingPort(ray *corev1.Container) int32 {
	for _, p := range ray.Ports {
		if p.Name == rayparams.ServingPortName {
			return p.ContainerPort
		}
	}
	return rayparams.DefaultServingPort
}
