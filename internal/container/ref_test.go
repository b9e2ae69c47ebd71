package container

import (
	"strings"
	"testing"
)

const (
	id64  = "4c01db0b339c24c2e0a4d9e4f2ab3e3d8d0a6a1c5b7e9f0123456789abcdef01"
	id64b = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	podU  = "6b1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
	podUS = "6b1b2c3d_4e5f_4a6b_8c7d_9e0f1a2b3c4d"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Ref
		str  string
	}{
		// The host and systemd.
		{"root", "/", Ref{}, "host"},
		{"root v2 line", "0::/", Ref{}, "host"},
		{"empty", "", Ref{}, "host"},
		{"init scope", "0::/init.scope", Ref{}, "host"},
		{"user session", "0::/user.slice/user-1000.slice/session-3.scope", Ref{}, "host"},
		{"service v2", "0::/system.slice/foo.service", Ref{Service: "foo"}, "service foo"},
		{"service v1 systemd", "1:name=systemd:/system.slice/cron.service", Ref{Service: "cron"}, "service cron"},
		{"service v1 cpu", "4:cpu,cpuacct:/system.slice/ssh.service", Ref{Service: "ssh"}, "service ssh"},
		{"templated service", "0::/system.slice/system-getty.slice/getty@tty1.service", Ref{Service: "getty@tty1"}, "service getty@tty1"},
		{"user service", "0::/user.slice/user-1000.slice/user@1000.service/app.slice/pipewire.service", Ref{Service: "pipewire"}, "service pipewire"},
		{"containerd's own service", "0::/system.slice/containerd.service", Ref{Service: "containerd"}, "service containerd"},
		// This machine's sandbox: a two-level path that is no containerd namespace.
		{"unknown two-level", "4:memory:/process_api/18efa6cde3c815e8cb72b50229ba1f64", Ref{}, "host"},

		// Docker.
		{"docker cgroupfs v1", "4:memory:/docker/" + id64, Ref{Runtime: "docker", ID: id64}, "docker 4c01db0b339c"},
		{"docker cgroupfs v2", "0::/docker/" + id64, Ref{Runtime: "docker", ID: id64}, "docker 4c01db0b339c"},
		{"docker systemd v2", "0::/system.slice/docker-" + id64 + ".scope", Ref{Runtime: "docker", ID: id64}, "docker 4c01db0b339c"},
		{"docker systemd v1", "9:name=systemd:/system.slice/docker-" + id64 + ".scope", Ref{Runtime: "docker", ID: id64}, ""},
		{"docker subcgroup", "0::/system.slice/docker-" + id64 + ".scope/init.scope", Ref{Runtime: "docker", ID: id64}, ""},
		{"docker in docker", "0::/docker/" + id64 + "/docker/" + id64b, Ref{Runtime: "docker", ID: id64b}, "docker 9f86d081884c"},
		{"docker short id is no container", "0::/docker/4c01db0b339c", Ref{}, "host"},
		{"docker.service", "0::/system.slice/docker.service", Ref{Service: "docker"}, "service docker"},

		// containerd (ctr, nerdctl): /<namespace>/<id>.
		{"containerd default v1", "4:memory:/default/sysray-t1", Ref{Runtime: "containerd", ID: "sysray-t1", Namespace: "default"}, "containerd default/sysray-t1"},
		{"containerd default v2", "0::/default/web", Ref{Runtime: "containerd", ID: "web", Namespace: "default"}, "containerd default/web"},
		{"containerd hex id", "0::/default/" + id64, Ref{Runtime: "containerd", ID: id64, Namespace: "default"}, "containerd default/4c01db0b339c"},
		{"containerd k8s.io ns", "0::/k8s.io/" + id64, Ref{Runtime: "containerd", ID: id64, Namespace: "k8s.io"}, "containerd 4c01db0b339c"},
		{"containerd ns alone", "0::/default", Ref{}, "host"},
		{"cri-containerd scope", "0::/system.slice/cri-containerd-" + id64 + ".scope", Ref{Runtime: "containerd", ID: id64, Namespace: "k8s.io"}, ""},

		// CRI-O.
		{"crio scope", "0::/machine.slice/crio-" + id64 + ".scope", Ref{Runtime: "cri-o", ID: id64}, "cri-o 4c01db0b339c"},
		{"crio conmon", "0::/machine.slice/crio-conmon-" + id64 + ".scope", Ref{Runtime: "cri-o", ID: id64, Monitor: true}, "cri-o conmon of 4c01db0b339c"},
		{"crio.service", "0::/system.slice/crio.service", Ref{Service: "crio"}, "service crio"},
		{"crio-wipe.service", "0::/system.slice/crio-wipe.service", Ref{Service: "crio-wipe"}, "service crio-wipe"},
		{"podman-restart.service", "0::/system.slice/podman-restart.service", Ref{Service: "podman-restart"}, "service podman-restart"},
		{"libpod- unit that is no container", "0::/system.slice/libpod-cleanup.service", Ref{Service: "libpod-cleanup"}, ""},

		// Podman.
		{"podman scope v2", "0::/machine.slice/libpod-" + id64 + ".scope", Ref{Runtime: "podman", ID: id64}, "podman 4c01db0b339c"},
		{"podman scope v1", "1:name=systemd:/machine.slice/libpod-" + id64 + ".scope", Ref{Runtime: "podman", ID: id64}, ""},
		{"podman container subcgroup", "0::/machine.slice/libpod-" + id64 + ".scope/container", Ref{Runtime: "podman", ID: id64}, ""},
		{"podman rootless", "0::/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" + id64 + ".scope", Ref{Runtime: "podman", ID: id64}, ""},
		{"podman cgroupfs", "0::/libpod_parent/libpod-" + id64, Ref{Runtime: "podman", ID: id64}, ""},
		{"podman conmon", "0::/machine.slice/libpod-conmon-" + id64 + ".scope", Ref{Runtime: "podman", ID: id64, Monitor: true}, "podman conmon of 4c01db0b339c"},

		// Plain runc.
		{"runc systemd", "0::/system.slice/runc-mybox.scope", Ref{Runtime: "runc", ID: "mybox"}, "runc mybox"},
		{"runc cgroupfs", "4:memory:/" + id64, Ref{Runtime: "runc", ID: id64}, "runc 4c01db0b339c"},
		{"runc scope without suffix is nothing", "0::/system.slice/runc-mybox", Ref{}, "host"},

		// LXC.
		{"lxc payload", "0::/lxc.payload.web1", Ref{Runtime: "lxc", ID: "web1"}, "lxc web1"},
		{"lxc monitor", "0::/lxc.monitor.web1", Ref{Runtime: "lxc", ID: "web1", Monitor: true}, "lxc conmon of web1"},
		{"lxc legacy", "4:memory:/lxc/web1", Ref{Runtime: "lxc", ID: "web1"}, "lxc web1"},

		// Kubernetes, cgroupfs driver.
		{"kube burstable cgroupfs v1", "4:memory:/kubepods/burstable/pod" + podU + "/" + id64,
			Ref{Runtime: "cri", ID: id64, PodUID: podU, QoS: "burstable"}, "cri 4c01db0b339c (pod " + podU + ")"},
		{"kube besteffort cgroupfs v2", "0::/kubepods/besteffort/pod" + podU + "/" + id64,
			Ref{Runtime: "cri", ID: id64, PodUID: podU, QoS: "besteffort"}, ""},
		{"kube guaranteed cgroupfs", "0::/kubepods/pod" + podU + "/" + id64,
			Ref{Runtime: "cri", ID: id64, PodUID: podU, QoS: "guaranteed"}, ""},
		{"kube crio cgroupfs", "0::/kubepods/burstable/pod" + podU + "/crio-" + id64,
			Ref{Runtime: "cri-o", ID: id64, PodUID: podU, QoS: "burstable"}, ""},
		{"kube pod cgroup only", "0::/kubepods/burstable/pod" + podU,
			Ref{PodUID: podU, QoS: "burstable"}, "pod " + podU},
		{"kube qos cgroup only", "0::/kubepods/burstable", Ref{}, "host"},
		{"kube static pod uid", "0::/kubepods/pod0123456789abcdef0123456789abcdef/" + id64,
			Ref{Runtime: "cri", ID: id64, PodUID: "0123456789abcdef0123456789abcdef", QoS: "guaranteed"}, ""},

		// Kubernetes, systemd driver.
		{"kube burstable containerd systemd v2",
			"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + podUS + ".slice/cri-containerd-" + id64 + ".scope",
			Ref{Runtime: "containerd", ID: id64, Namespace: "k8s.io", PodUID: podU, QoS: "burstable"}, "containerd 4c01db0b339c (pod " + podU + ")"},
		{"kube burstable containerd systemd v1",
			"9:name=systemd:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + podUS + ".slice/cri-containerd-" + id64 + ".scope",
			Ref{Runtime: "containerd", ID: id64, Namespace: "k8s.io", PodUID: podU, QoS: "burstable"}, ""},
		{"kube besteffort crio systemd",
			"0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + podUS + ".slice/crio-" + id64 + ".scope",
			Ref{Runtime: "cri-o", ID: id64, PodUID: podU, QoS: "besteffort"}, ""},
		{"kube besteffort crio conmon",
			"0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + podUS + ".slice/crio-conmon-" + id64 + ".scope",
			Ref{Runtime: "cri-o", ID: id64, PodUID: podU, QoS: "besteffort", Monitor: true}, ""},
		{"kube guaranteed systemd",
			"0::/kubepods.slice/kubepods-pod" + podUS + ".slice/cri-containerd-" + id64 + ".scope",
			Ref{Runtime: "containerd", ID: id64, Namespace: "k8s.io", PodUID: podU, QoS: "guaranteed"}, ""},
		{"kube docker systemd",
			"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + podUS + ".slice/docker-" + id64 + ".scope",
			Ref{Runtime: "docker", ID: id64, PodUID: podU, QoS: "burstable"}, ""},
		{"kube pod slice only",
			"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + podUS + ".slice",
			Ref{PodUID: podU, QoS: "burstable"}, ""},
		{"kube qos slice only", "0::/kubepods.slice/kubepods-besteffort.slice", Ref{}, "host"},
		{"kubelet service", "0::/system.slice/kubelet.service", Ref{Service: "kubelet"}, "service kubelet"},

		// Inside a cgroup namespace a foreign cgroup shows with "..".
		{"dotdot", "0::/../../docker/" + id64, Ref{Runtime: "docker", ID: id64}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Parse(tt.in)
			tt.want.Path = stripLinePrefix(tt.in)
			if got != tt.want {
				t.Errorf("Parse(%q)\n got  %+v\n want %+v", tt.in, got, tt.want)
			}
			if tt.str != "" && got.String() != tt.str {
				t.Errorf("String() = %q, want %q", got.String(), tt.str)
			}
		})
	}
}

func TestParserNamespaces(t *testing.T) {
	p := NewParser("default", "buildkit")
	if r := p.Parse("/buildkit/abc"); r.Runtime != RuntimeContainerd || r.Namespace != "buildkit" || r.ID != "abc" {
		t.Errorf("learned namespace: %+v", r)
	}
	if r := p.Parse("/k8s.io/abc"); !r.IsHost() {
		t.Errorf("k8s.io not in this parser's namespaces: %+v", r)
	}
	if r := Parse("/buildkit/abc"); !r.IsHost() {
		t.Errorf("default parser guessed a namespace: %+v", r)
	}
}

func TestShortID(t *testing.T) {
	for id, want := range map[string]string{
		id64:               "4c01db0b339c",
		"web":              "web",
		"a-long-name-here": "a-long-name-here",
		"":                 "",
	} {
		if got := (Ref{ID: id}).ShortID(); got != want {
			t.Errorf("ShortID(%q) = %q, want %q", id, got, want)
		}
	}
}

func TestCgroupLines(t *testing.T) {
	in := "12:cpu,cpuacct:/docker/x\n1:name=systemd:/a\n0::/b\ngarbage\n\nx:y:z\n"
	got := CgroupLines([]byte(in))
	if len(got) != 3 {
		t.Fatalf("got %d lines: %+v", len(got), got)
	}
	if got[0].Hierarchy != 12 || strings.Join(got[0].Controllers, ",") != "cpu,cpuacct" || got[0].Path != "/docker/x" || got[0].V2() {
		t.Errorf("line 0: %+v", got[0])
	}
	if got[1].Controllers[0] != "name=systemd" || got[1].V2() {
		t.Errorf("line 1: %+v", got[1])
	}
	if !got[2].V2() || got[2].Path != "/b" {
		t.Errorf("line 2: %+v", got[2])
	}
}

// Whole /proc/PID/cgroup files, as seen on pure v1, hybrid and pure v2 hosts.
func TestParseCgroupFile(t *testing.T) {
	v1 := func(path string) string {
		return strings.ReplaceAll(`12:pids:P
11:memory:P
4:cpu,cpuacct:P
1:name=systemd:P
`, "P", path)
	}
	tests := []struct {
		name   string
		file   string
		want   Ref
		v2     string
		fromV1 bool
	}{
		{"pure v2 containerd", "0::/default/web\n", Ref{Runtime: "containerd", ID: "web", Namespace: "default", Path: "/default/web"}, "/default/web", false},
		{"pure v2 host", "0::/init.scope\n", Ref{Path: "/init.scope"}, "/init.scope", false},
		{"pure v1 docker", v1("/docker/" + id64), Ref{Runtime: "docker", ID: id64, Path: "/docker/" + id64}, "", true},
		{"pure v1 service", v1("/system.slice/cron.service"), Ref{Service: "cron", Path: "/system.slice/cron.service"}, "", false},
		// Hybrid, runtime joined the unified hierarchy too (runc 1.1 here).
		{"hybrid both", v1("/default/sysray-t1") + "0::/default/sysray-t1\n",
			Ref{Runtime: "containerd", ID: "sysray-t1", Namespace: "default", Path: "/default/sysray-t1"}, "/default/sysray-t1", false},
		// Hybrid, container placed only in v1: the v2 cgroup is the root.
		{"hybrid v1 only", v1("/default/sysray-t1") + "0::/\n",
			Ref{Runtime: "containerd", ID: "sysray-t1", Namespace: "default", Path: "/default/sysray-t1"}, "/", true},
		// Hybrid, v2 left in the runtime's service.
		{"hybrid v2 in service", v1("/default/web") + "0::/system.slice/containerd.service\n",
			Ref{Runtime: "containerd", ID: "web", Namespace: "default", Path: "/default/web"}, "/system.slice/containerd.service", true},
		// Only one v1 controller set: memory wins over nothing.
		{"hybrid memory only", "9:name=systemd:/\n4:memory:/docker/" + id64 + "\n0::/\n",
			Ref{Runtime: "docker", ID: id64, Path: "/docker/" + id64}, "/", true},
		// name=systemd is preferred over other v1 controllers.
		{"v1 order", "4:memory:/docker/" + id64 + "\n1:name=systemd:/docker/" + id64b + "\n0::/\n",
			Ref{Runtime: "docker", ID: id64b, Path: "/docker/" + id64b}, "/", true},
		// This sandbox: nothing anywhere.
		{"sandbox", "9:name=systemd:/\n4:memory:/process_api/18efa6cde3c815e8cb72b50229ba1f64\n0::/\n", Ref{Path: "/"}, "/", false},
		{"kube v1 pod", v1("/kubepods/burstable/pod"+podU+"/"+id64) + "0::/\n",
			Ref{Runtime: "cri", ID: id64, PodUID: podU, QoS: "burstable", Path: "/kubepods/burstable/pod" + podU + "/" + id64}, "/", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ParseCgroupFile([]byte(tt.file))
			if got.Ref != tt.want || got.V2Path != tt.v2 || got.FromV1 != tt.fromV1 {
				t.Errorf("got  %+v\nwant {Ref:%+v V2Path:%s FromV1:%v}", got, tt.want, tt.v2, tt.fromV1)
			}
		})
	}
}
