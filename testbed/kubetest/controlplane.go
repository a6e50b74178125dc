// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package kubetest starts a real, local Kubernetes control plane for integration and
// end-to-end tests: Debian's etcd, kube-apiserver and kube-controller-manager (built from
// the tools/kube module) on free loopback ports with a throw-away PKI. It is the project's
// own envtest, without downloads, plus the controller manager so that garbage collection,
// namespace deletion and service-account tokens behave as in a real cluster.
package kubetest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/netpulse/netpulse/testbed/childproc"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Options tune a control plane. The zero value is a sensible default.
type Options struct {
	// BindAddress is where kube-apiserver listens (default 127.0.0.1). End-to-end tests
	// set the host side of their test bridge so agents in network namespaces reach it.
	BindAddress net.IP
	// NoControllerManager skips kube-controller-manager (faster start; no garbage
	// collection, namespace finalisation or default service accounts).
	NoControllerManager bool
	// Dir holds data, certificates and logs; default a fresh temp dir removed on Stop.
	Dir string
	// StartTimeout bounds the whole start (default 90s).
	StartTimeout time.Duration
	// Logf receives lifecycle lines (default: discarded).
	Logf func(format string, args ...any)
	// ExtraAPIServerFlags are added to kube-apiserver's command line; a flag given here
	// replaces the default of the same name (list flags would otherwise append).
	ExtraAPIServerFlags []string
	// ExtraServingIPs are added to the API server's serving certificate (e.g. the
	// ClusterIP of the kubernetes Service, for pods on real nodes).
	ExtraServingIPs []net.IP
	// Controllers is kube-controller-manager's --controllers list; nil: only what the
	// simulated cluster relies on (no node lifecycle, no workload controllers), since no
	// kubelet runs there. Real nodes set "*".
	Controllers []string
	// ExtraControllerManagerFlags are appended to kube-controller-manager's command line.
	ExtraControllerManagerFlags []string
}

// defaultControllers are the controllers tests without kubelets rely on: no node-lifecycle
// controller, which would taint and evict pods of simulated nodes that have no kubelet
// heartbeat.
var defaultControllers = []string{"garbage-collector-controller", "serviceaccount-controller", "namespace-controller", "root-ca-certificate-publisher-controller"}

// ControlPlane is a running etcd + kube-apiserver (+ kube-controller-manager).
type ControlPlane struct {
	// Config is an admin (system:masters) client configuration.
	Config *rest.Config
	// Kubeconfig is the path of an admin kubeconfig file (for kubectl and collectors).
	Kubeconfig string
	// URL is the API server's base URL.
	URL string
	// Dir is the working directory (data, certificates, logs).
	Dir string
	// Binaries used by this control plane.
	Binaries Binaries

	opts       Options
	pki        *pki
	ownDir     bool
	etcdURL    string
	apiPort    int
	mu         sync.Mutex
	etcd       *childproc.Process
	apiserver  *childproc.Process
	controller *childproc.Process
	stopped    bool
	// saRotated: the service-account key files after RotateServiceAccountKey (signing key,
	// then every public key accepted); empty for the original key alone.
	saRotated []string
}

// Start brings up a control plane and waits until the API server is ready (and, with the
// controller manager, until the default service account exists). On error everything
// already started is torn down.
func Start(ctx context.Context, opts Options) (cp *ControlPlane, err error) {
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 90 * time.Second
	}
	if opts.BindAddress == nil {
		opts.BindAddress = net.IPv4(127, 0, 0, 1)
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	bins, err := FindBinaries()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()

	cp = &ControlPlane{opts: opts, Binaries: bins, Dir: opts.Dir}
	if cp.Dir == "" {
		// etcd fsyncs on every write; a tmpfs keeps that cheap on shared CI disks.
		base := ""
		if st, statErr := os.Stat("/dev/shm"); statErr == nil && st.IsDir() {
			base = "/dev/shm"
		}
		if cp.Dir, err = os.MkdirTemp(base, "netpulse-kubetest-"); err != nil {
			return nil, err
		}
		cp.ownDir = true
	}
	// The deferred Stop holds the control plane itself: `return nil, err` clears cp.
	started := cp
	defer func() {
		if err != nil {
			_ = started.Stop()
		}
	}()

	if cp.pki, err = newPKI(cp.Dir, append([]net.IP{opts.BindAddress}, opts.ExtraServingIPs...)); err != nil {
		return nil, fmt.Errorf("kubetest: pki: %w", err)
	}
	if err = cp.startEtcd(ctx); err != nil {
		return nil, err
	}
	if cp.apiPort, err = freePort(opts.BindAddress); err != nil {
		return nil, err
	}
	cp.URL = "https://" + net.JoinHostPort(opts.BindAddress.String(), strconv.Itoa(cp.apiPort))
	cp.Config = &rest.Config{
		Host: cp.URL,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   cp.pki.caCertPEM,
			CertData: cp.pki.adminCertPEM,
			KeyData:  cp.pki.adminKeyPEM,
		},
		QPS:   200,
		Burst: 400,
	}
	cp.Kubeconfig = filepath.Join(cp.Dir, "admin.kubeconfig")
	if err = WriteKubeconfig(cp.Config, cp.Kubeconfig); err != nil {
		return nil, err
	}
	if err = cp.StartAPIServer(ctx); err != nil {
		return nil, err
	}
	if !opts.NoControllerManager {
		if err = cp.startControllerManager(ctx); err != nil {
			return nil, err
		}
	}
	return cp, nil
}

func (cp *ControlPlane) startEtcd(ctx context.Context) error {
	clientPort, err := freePort(net.IPv4(127, 0, 0, 1))
	if err != nil {
		return err
	}
	peerPort, err := freePort(net.IPv4(127, 0, 0, 1))
	if err != nil {
		return err
	}
	cp.etcdURL = "http://127.0.0.1:" + strconv.Itoa(clientPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	args := []string{
		"--name=default",
		"--data-dir=" + filepath.Join(cp.Dir, "etcd"),
		"--listen-client-urls=" + cp.etcdURL,
		"--advertise-client-urls=" + cp.etcdURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=default=" + peerURL,
		"--log-level=warn",
		"--logger=zap",
	}
	p, err := childproc.Start(childproc.Options{Name: "etcd", Harness: "kubetest", Argv: append([]string{cp.Binaries.Etcd}, args...), LogPath: filepath.Join(cp.Dir, "etcd.log")})
	if err != nil {
		return err
	}
	cp.etcd = p
	cp.opts.Logf("kubetest: etcd started at %s (pid %d)", cp.etcdURL, p.Pid())
	return waitHTTP(ctx, p, http.DefaultClient, cp.etcdURL+"/health")
}

// StartAPIServer starts kube-apiserver on the control plane's fixed port. It is called by
// Start; tests call it again after StopAPIServer to simulate an API server restart.
func (cp *ControlPlane) StartAPIServer(ctx context.Context) error {
	cp.mu.Lock()
	if cp.apiserver != nil && !cp.apiserver.Exited() {
		cp.mu.Unlock()
		return errors.New("kubetest: kube-apiserver is already running")
	}
	saSigning, saPubs := cp.pki.saKeyFile, []string{cp.pki.saPubFile}
	if len(cp.saRotated) > 0 {
		saSigning, saPubs = cp.saRotated[0], cp.saRotated[1:]
	}
	cp.mu.Unlock()
	args := []string{
		"--etcd-servers=" + cp.etcdURL,
		"--bind-address=" + cp.opts.BindAddress.String(),
		"--advertise-address=" + cp.opts.BindAddress.String(),
		"--secure-port=" + strconv.Itoa(cp.apiPort),
		"--tls-cert-file=" + cp.pki.servingCert,
		"--tls-private-key-file=" + cp.pki.servingKey,
		"--client-ca-file=" + cp.pki.caCertFile,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-signing-key-file=" + saSigning,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--authorization-mode=RBAC",
		"--allow-privileged=true",
		"--endpoint-reconciler-type=none",
		"--profiling=false",
		"--cert-dir=" + filepath.Join(cp.Dir, "apiserver-certs"),
	}
	for _, pub := range saPubs {
		args = append(args, "--service-account-key-file="+pub)
	}
	args = overrideFlags(args, cp.opts.ExtraAPIServerFlags)
	p, err := childproc.Start(childproc.Options{Name: "kube-apiserver", Harness: "kubetest", Argv: append([]string{cp.Binaries.APIServer}, args...), LogPath: filepath.Join(cp.Dir, "kube-apiserver.log")})
	if err != nil {
		return err
	}
	cp.mu.Lock()
	cp.apiserver = p
	cp.mu.Unlock()
	cp.opts.Logf("kubetest: kube-apiserver starting at %s (pid %d)", cp.URL, p.Pid())
	client, err := cp.adminHTTPClient()
	if err != nil {
		return err
	}
	return waitHTTP(ctx, p, client, cp.URL+"/readyz")
}

// StopAPIServer stops kube-apiserver (SIGTERM, then SIGKILL after 3 s) and leaves etcd
// running, so StartAPIServer brings the same cluster back on the same address. With
// clients holding watches, kube-apiserver rarely finishes its graceful shutdown within
// seconds; an outage test does not need it to.
func (cp *ControlPlane) StopAPIServer() error {
	cp.mu.Lock()
	p := cp.apiserver
	cp.mu.Unlock()
	if p == nil {
		return nil
	}
	return p.Stop(3 * time.Second)
}

func (cp *ControlPlane) startControllerManager(ctx context.Context) error {
	controllers := cp.opts.Controllers
	if controllers == nil {
		controllers = defaultControllers
	}
	args := []string{
		"--kubeconfig=" + cp.Kubeconfig,
		"--authentication-kubeconfig=" + cp.Kubeconfig,
		"--authorization-kubeconfig=" + cp.Kubeconfig,
		"--controllers=" + strings.Join(controllers, ","),
		"--root-ca-file=" + cp.pki.caCertFile,
		"--leader-elect=false",
		"--secure-port=0",
		"--concurrent-gc-syncs=5",
		"--namespace-sync-period=10s",
	}
	args = overrideFlags(args, cp.opts.ExtraControllerManagerFlags)
	p, err := childproc.Start(childproc.Options{Name: "kube-controller-manager", Harness: "kubetest", Argv: append([]string{cp.Binaries.ControllerManager}, args...), LogPath: filepath.Join(cp.Dir, "kube-controller-manager.log")})
	if err != nil {
		return err
	}
	cp.controller = p
	cp.opts.Logf("kubetest: kube-controller-manager started (pid %d)", p.Pid())
	// The default service account appearing proves the controller manager is working.
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return err
	}
	for {
		if _, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1GetOptions); err == nil {
			return nil
		}
		if p.Exited() {
			return fmt.Errorf("kubetest: kube-controller-manager exited: %v\n%s", p.Err(), p.LogTail(40))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kubetest: kube-controller-manager did not create the default service account: %w\n%s", ctx.Err(), p.LogTail(40))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Stop tears everything down (controller manager, API server, etcd) and removes the temp
// dir. It is safe to call more than once.
func (cp *ControlPlane) Stop() error {
	cp.mu.Lock()
	if cp.stopped {
		cp.mu.Unlock()
		return nil
	}
	cp.stopped = true
	procs := []*childproc.Process{cp.controller, cp.apiserver, cp.etcd}
	cp.mu.Unlock()
	var errs []error
	for _, p := range procs {
		if p != nil {
			if err := p.Stop(10 * time.Second); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if cp.ownDir {
		if err := os.RemoveAll(cp.Dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Logs returns the last lines of each component's log, for failure reports.
func (cp *ControlPlane) Logs(lines int) string {
	out := ""
	for _, name := range []string{"etcd", "kube-apiserver", "kube-controller-manager"} {
		path := filepath.Join(cp.Dir, name+".log")
		if _, err := os.Stat(path); err == nil {
			out += "--- " + name + " ---\n" + childproc.TailFile(path, lines) + "\n"
		}
	}
	return out
}

// overrideFlags returns defaults without the flags extra names, followed by extra.
func overrideFlags(defaults, extra []string) []string {
	name := func(f string) string { n, _, _ := strings.Cut(f, "="); return n }
	given := map[string]bool{}
	for _, f := range extra {
		given[name(f)] = true
	}
	out := make([]string, 0, len(defaults)+len(extra))
	for _, f := range defaults {
		if !given[name(f)] {
			out = append(out, f)
		}
	}
	return append(out, extra...)
}

// IssueClientCert signs a client certificate with the control plane's CA: the API server
// authenticates it as user cn in groups orgs (a kubelet: "system:node:<name>" in
// "system:nodes"; kube-proxy: "system:kube-proxy").
func (cp *ControlPlane) IssueClientCert(cn string, orgs ...string) (certPEM, keyPEM []byte, err error) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.pki.issue(cn, orgs, x509.ExtKeyUsageClientAuth, nil, nil)
}

// CACertPEM is the control plane's CA certificate (it signs the API server's serving
// certificate and every client certificate).
func (cp *ControlPlane) CACertPEM() []byte { return cp.pki.caCertPEM }

// CACertFile is the path of the CA certificate.
func (cp *ControlPlane) CACertFile() string { return cp.pki.caCertFile }

// AdminCertFiles are the paths of the admin (system:masters) client certificate and key.
func (cp *ControlPlane) AdminCertFiles() (cert, key string) {
	return cp.pki.adminCertFile, cp.pki.adminKeyFile
}

// Clientset returns an admin clientset.
func (cp *ControlPlane) Clientset() (*kubernetes.Clientset, error) {
	return kubernetes.NewForConfig(cp.Config)
}

func (cp *ControlPlane) adminHTTPClient() (*http.Client, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(cp.pki.caCertPEM) {
		return nil, errors.New("kubetest: bad CA")
	}
	cert, err := tls.X509KeyPair(cp.pki.adminCertPEM, cp.pki.adminKeyPEM)
	if err != nil {
		return nil, err
	}
	return &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{
			RootCAs:      pool,
			Certificates: []tls.Certificate{cert},
			MinVersion:   tls.VersionTLS12,
		}},
	}, nil
}

// WriteKubeconfig writes cfg (certificate or bearer-token credentials) as a kubeconfig file.
func WriteKubeconfig(cfg *rest.Config, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["netpulse"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["user"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData,
		ClientKeyData:         cfg.KeyData,
		Token:                 cfg.BearerToken,
	}
	kc.Contexts["netpulse"] = &clientcmdapi.Context{Cluster: "netpulse", AuthInfo: "user"}
	kc.CurrentContext = "netpulse"
	return clientcmd.WriteToFile(*kc, path)
}

func freePort(ip net.IP) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		return 0, fmt.Errorf("kubetest: find a free port on %s: %w", ip, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitHTTP polls url until it answers 200, the process exits, or ctx ends.
func waitHTTP(ctx context.Context, p *childproc.Process, client *http.Client, url string) error {
	var last string
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, body)
		} else {
			last = err.Error()
		}
		if p.Exited() {
			return fmt.Errorf("kubetest: %s exited before %s was ready: %v\n%s", p.Name, url, p.Err(), p.LogTail(40))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kubetest: %s not ready: %w (last answer: %s)\n%s", url, ctx.Err(), last, p.LogTail(40))
		case <-time.After(100 * time.Millisecond):
		}
	}
}
