// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package agentbench

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
)

const (
	namespace           = "netpulse"
	agentServiceAccount = "netpulse-agent"
	workloadNamespace   = "workload"
)

// peerIP is agent pod i's IP (i >= 1): a loopback address, which answers ICMP echoes.
// Pod 0 is the measured agent; its IP is the address the process binds (agentIP).
func peerIP(i int) net.IP { return net.IPv4(127, 91, byte(i/250), byte(1+i%250)) }

func nodeName(i int) string { return fmt.Sprintf("bench-node-%05d", i) }

// images a kubelet reports in node.status.images: a node's cached images, the bulk of a
// Node object on a real cluster (the kubelet reports up to 50).
func nodeImages(i int) []corev1.ContainerImage {
	out := make([]corev1.ContainerImage, 0, 40)
	for j := range 40 {
		repo := fmt.Sprintf("registry.example.com/team-%02d/service-%02d", j%7, (i+j)%40)
		digest := fmt.Sprintf("%064x", uint64(i)*1_000_003+uint64(j))
		out = append(out, corev1.ContainerImage{
			Names:     []string{repo + "@sha256:" + digest, repo + ":v1." + strconv.Itoa(j)},
			SizeBytes: int64(20_000_000 + 1_000_000*j),
		})
	}
	return out
}

// createNode creates node i with labels, annotations and a status shaped like a kubelet's.
func createNode(ctx context.Context, cs kubernetes.Interface, i int) error {
	name := nodeName(i)
	zone := fmt.Sprintf("zone-%c", 'a'+i%3)
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
			"beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64",
			"node.kubernetes.io/instance-type": "m5.xlarge", "topology.kubernetes.io/zone": zone,
			"topology.kubernetes.io/region": "region-1", "failure-domain.beta.kubernetes.io/zone": zone,
			"node-pool": fmt.Sprintf("pool-%d", i%4),
		}, Annotations: map[string]string{
			"node.alpha.kubernetes.io/ttl":                           "0",
			"volumes.kubernetes.io/controller-managed-attach-detach": "true",
			"csi.volume.kubernetes.io/nodeid":                        fmt.Sprintf(`{"ebs.csi.aws.com":"i-%017x"}`, i),
		}},
		Spec: corev1.NodeSpec{PodCIDR: fmt.Sprintf("10.%d.%d.0/24", 64+i/256, i%256), ProviderID: fmt.Sprintf("aws:///%s/i-%017x", zone, i)},
	}
	node.Spec.PodCIDRs = []string{node.Spec.PodCIDR}
	created, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	now := metav1.Now()
	rl := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16093564Ki"),
		corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceEphemeralStorage: resource.MustParse("83873772Ki"),
		"hugepages-1Gi": resource.MustParse("0"), "hugepages-2Mi": resource.MustParse("0"),
	}
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, LastHeartbeatTime: now, LastTransitionTime: now, Reason: reason, Message: msg}
	}
	created.Status = corev1.NodeStatus{
		Capacity: rl, Allocatable: rl,
		Conditions: []corev1.NodeCondition{
			cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
			cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
			cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
			cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
		},
		Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.0.%d.%d", i/250, 1+i%250)},
			{Type: corev1.NodeHostName, Address: name},
			{Type: corev1.NodeInternalDNS, Address: name + ".region-1.compute.internal"},
		},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
		NodeInfo: corev1.NodeSystemInfo{
			MachineID: fmt.Sprintf("%032x", i), SystemUUID: fmt.Sprintf("ec2%029x", i), BootID: fmt.Sprintf("%032x", i+7),
			KernelVersion: "6.1.112-124.190.amzn2023.x86_64", OSImage: "Amazon Linux 2023.6.20241111",
			ContainerRuntimeVersion: "containerd://1.7.23", KubeletVersion: "v1.36.3", OperatingSystem: "linux", Architecture: "amd64",
		},
		Images: nodeImages(i),
	}
	_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
	return err
}

// createAgentPod creates agent pod i on node i from the DaemonSet's template, as its
// controller would, and plays the kubelet: Running and Ready for an hour at ip.
func createAgentPod(ctx context.Context, cs kubernetes.Interface, ds *appsv1.DaemonSet, i int, ip net.IP) (*corev1.Pod, error) {
	tmpl := ds.Spec.Template
	labels := map[string]string{"pod-template-generation": strconv.FormatInt(ds.Generation, 10), "controller-revision-hash": "6d9c8b7f5c"}
	for k, v := range tmpl.Labels {
		labels[k] = v
	}
	yes := true
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("netpulse-agent-%05d", i), Namespace: namespace, Labels: labels, Annotations: tmpl.Annotations,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID, Controller: &yes, BlockOwnerDeletion: &yes}},
		},
		Spec: *tmpl.Spec.DeepCopy(),
	}
	pod.Spec.NodeName = nodeName(i)
	return runPod(ctx, cs, pod, ip)
}

// createWorkloadPod creates the j-th other pod of node i: a Deployment's replica with
// what such pods carry (two containers, env, probes, volumes), Running and Ready. No agent
// selects these; they are here because a cluster has them and a watch that is not
// label-scoped would pay for them.
func createWorkloadPod(ctx context.Context, cs kubernetes.Interface, i, j int) error {
	app := fmt.Sprintf("app-%02d", (i+j)%50)
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 10}
	container := func(name, image string, port int32) corev1.Container {
		return corev1.Container{
			Name: name, Image: image, Ports: []corev1.ContainerPort{{Name: name, ContainerPort: port}},
			Env: []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "info"}, {Name: "APP", Value: app}, {Name: "REGION", Value: "region-1"},
				{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
			Resources:      corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")}},
			ReadinessProbe: probe, LivenessProbe: probe,
			VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/app"}},
		}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("%s-%05d-%d", app, i, j), Namespace: workloadNamespace,
			Labels:      map[string]string{"app.kubernetes.io/name": app, "pod-template-hash": "7f9d6c5b8d"},
			Annotations: map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "8080"},
		},
		Spec: corev1.PodSpec{
			NodeName:   nodeName(i),
			Containers: []corev1.Container{container("app", "registry.example.com/team-01/"+app+":v1.4.2", 8080), container("proxy", "registry.example.com/mesh/proxy:v1.22.0", 15001)},
			Volumes:    []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: app}}}}},
		},
	}
	_, err := runPod(ctx, cs, pod, net.IPv4(10, byte(64+i/256), byte(i%256), byte(10+j)))
	return err
}

// runPod creates pod and writes the status a kubelet would: Running, Ready an hour ago,
// ip as its pod IP, its containers running.
func runPod(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod, ip net.IP) (*corev1.Pod, error) {
	pod, err := cs.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	since := metav1.NewTime(time.Now().Add(-time.Hour))
	hostIP := "10.0.0.1"
	pod.Status = corev1.PodStatus{
		Phase: corev1.PodRunning, HostIP: hostIP, HostIPs: []corev1.HostIP{{IP: hostIP}},
		PodIP: ip.String(), PodIPs: []corev1.PodIP{{IP: ip.String()}}, StartTime: &since, QOSClass: corev1.PodQOSBurstable,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: since},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: since},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: since},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: since},
		},
	}
	for _, c := range pod.Spec.Containers {
		yes := true
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: c.Image + "@sha256:" + fmt.Sprintf("%064x", len(c.Image)), Ready: true, Started: &yes,
			ContainerID: "containerd://" + fmt.Sprintf("%064x", since.UnixNano()), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: since}},
		})
	}
	return cs.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
}

// grow adds nodes [from, to): each with its agent pod and perNode workload pods.
func grow(ctx context.Context, cs kubernetes.Interface, ds *appsv1.DaemonSet, from, to, perNode int, measuredIP net.IP) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i := from; i < to; i++ {
		g.Go(func() error {
			if err := createNode(gctx, cs, i); err != nil {
				return fmt.Errorf("node %d: %w", i, err)
			}
			ip := peerIP(i)
			if i == 0 {
				ip = measuredIP
			}
			if _, err := createAgentPod(gctx, cs, ds, i, ip); err != nil {
				return fmt.Errorf("agent pod %d: %w", i, err)
			}
			for j := range perNode {
				if err := createWorkloadPod(gctx, cs, i, j); err != nil {
					return fmt.Errorf("workload pod %d/%d: %w", i, j, err)
				}
			}
			return nil
		})
	}
	return g.Wait()
}
