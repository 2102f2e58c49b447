//! The namespace "second host" (src/proc/netns.rs) for real: its own PID
//! namespace (pids map through NSpid), its own /dev/shm, an address of the
//! run's choosing reachable from this host, and nothing left behind when
//! its owner is SIGKILLed: no process, no namespace, no link.
//!
//! Needs root (or CAP_SYS_ADMIN + CAP_NET_ADMIN); without it each trial is
//! reported ignored, naming the missing capability (failed under
//! `PHASE1_REQUIRE_ALL=1`).

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::Duration;

use kvcr_e2e::proc::netns::{self, NamespaceNode};
use kvcr_e2e::proc::procfs;

mod lanes;
use lanes::{link_exists, poll};

/// Set in the environment of the child that owns a node and gets SIGKILLed.
const CHILD_ENV: &str = "KVCR_E2E_NODE_OWNER_CHILD";
const BUDGET: Duration = Duration::from_secs(20);

fn main() -> std::process::ExitCode {
    if std::env::var_os(CHILD_ENV).is_some() {
        child_that_owns_a_node();
    }
    let trials = vec![
        trial(
            "a_node_has_its_own_pids_shm_and_address",
            a_node_has_its_own_pids_shm_and_address,
        ),
        trial(
            "a_sigkilled_owner_leaves_no_process_namespace_or_link",
            a_sigkilled_owner_leaves_no_process_namespace_or_link,
        ),
        trial(
            "a_read_from_node_1_crosses_the_veth_and_a_same_host_read_does_not",
            a_read_from_node_1_crosses_the_veth_and_a_same_host_read_does_not,
        ),
        trial(
            "a_wrapped_process_starts_in_its_own_working_directory",
            a_wrapped_process_starts_in_its_own_working_directory,
        ),
        trial(
            "each_degraded_link_condition_shows_in_its_counters_and_comes_off_clean",
            each_degraded_link_condition_shows_in_its_counters_and_comes_off_clean,
        ),
    ];
    libtest_mimic::run(&libtest_mimic::Arguments::from_args(), trials).exit_code()
}

/// A trial that runs where this process may create a namespace node.
fn trial(name: &str, body: fn()) -> libtest_mimic::Trial {
    kvcr_e2e::suite::machine_trial(name, netns::precondition, body)
}

fn pid_namespace(pid: u32) -> Option<std::path::PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/ns/pid")).ok()
}

/// Host pids of every process in the PID namespace `ns`.
fn members(ns: &std::path::Path) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
                .filter(|pid| pid_namespace(*pid).as_deref() == Some(ns))
                .collect()
        })
        .unwrap_or_default()
}

fn a_node_has_its_own_pids_shm_and_address() {
    let logs = tempfile::tempdir().unwrap();
    let node = NamespaceNode::create("test-pids", logs.path(), BUDGET).expect("a namespace node");
    let marker = format!("/dev/shm/kvcr-e2e-node-test-{}", std::process::id());
    std::fs::write(&marker, b"host").unwrap();

    // A process inside reports its own pid: namespace-local, not a host pid.
    let mut inside = Command::new(&node.launcher()[0])
        .args(&node.launcher()[1..])
        .args([
            "sh",
            "-c",
            &format!(
                "echo $$; test -e {marker} && echo shm-shared || echo shm-private; exec sleep 30"
            ),
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(inside.stdout.take().unwrap()).lines();
    let inner: u32 = lines.next().unwrap().unwrap().trim().parse().unwrap();
    let shm = lines.next().unwrap().unwrap();
    let host = procfs::host_pid(node.init_pid(), inner).expect("the inner pid maps to a host pid");
    assert_ne!(
        host, inner,
        "inside a PID namespace a pid is namespace-local"
    );
    assert!(procfs::is_alive(host));
    assert_eq!(
        procfs::ns_pids(host).and_then(|p| p.last().copied()),
        Some(inner)
    );
    assert_eq!(
        procfs::ns_pids(host).and_then(|p| p.first().copied()),
        Some(host)
    );
    assert_eq!(shm, "shm-private", "node 1 must not see node 0's /dev/shm");
    let _ = std::fs::remove_file(&marker);

    // The node answers at the run's own address, through the run's own veth.
    node.expect_route()
        .expect("the node's address routes to our veth");
    let addresses = node.addresses();
    let mut listener = Command::new(&node.launcher()[0])
        .args(&node.launcher()[1..])
        .args([
            "python3",
            "-c",
            &format!(
                "import socket; s=socket.socket(); s.bind(('{}', 0)); s.listen(1); \
                 print(s.getsockname()[1], flush=True); c,_=s.accept(); c.sendall(b'node1')",
                addresses.node
            ),
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(listener.stdout.take().unwrap());
    let mut port = String::new();
    out.read_line(&mut port).unwrap();
    let port: u16 = port.trim().parse().expect("the listener printed its port");
    let target = std::net::SocketAddr::from((addresses.node, port));
    let mut stream = std::net::TcpStream::connect_timeout(&target, Duration::from_secs(5))
        .expect("a TCP connection from this host to node 1");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).unwrap();
    assert_eq!(reply, "node1");
    let _ = listener.wait();

    let init = node.init_pid();
    let interface = node.host_interface().to_string();
    node.stop();
    let _ = inside.kill();
    let _ = inside.wait();
    poll("the inner process to die with its node", BUDGET, || {
        (!procfs::is_alive(host)).then_some(())
    });
    assert!(!procfs::is_alive(init));
    assert!(!link_exists(&interface), "the host end {interface} is gone");
}

/// Runs instead of the trials in the child of the test below (`CHILD_ENV`
/// set): creates a node, reports it, waits to be SIGKILLed.
fn child_that_owns_a_node() -> ! {
    let logs = tempfile::tempdir().unwrap();
    let node = NamespaceNode::create("test-kill", logs.path(), BUDGET).expect("a namespace node");
    println!(
        "NODE {} {} {}",
        node.holder_pid(),
        node.init_pid(),
        node.host_interface()
    );
    loop {
        std::thread::park();
    }
}

fn a_sigkilled_owner_leaves_no_process_namespace_or_link() {
    let mut owner = Command::new(std::env::current_exe().unwrap())
        .env(CHILD_ENV, "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = BufReader::new(owner.stdout.take().unwrap());
    let line = out
        .lines()
        .map_while(Result::ok)
        .find_map(|l| l.split_once("NODE ").map(|(_, facts)| facts.to_string()))
        .expect("the owner reports its node");
    let fields: Vec<&str> = std::iter::once("NODE")
        .chain(line.split_whitespace())
        .collect();
    let (holder, init): (u32, u32) = (fields[1].parse().unwrap(), fields[2].parse().unwrap());
    let interface = fields[3].to_string();
    let namespace = pid_namespace(init).expect("the node's PID namespace");
    assert!(link_exists(&interface), "the node is up before the kill");

    owner.kill().unwrap(); // SIGKILL: no teardown code runs
    owner.wait().unwrap();

    poll(
        "unshare, its namespace's processes and the veth to be gone",
        BUDGET,
        || {
            let left = members(&namespace);
            (!procfs::is_alive(holder) && left.is_empty() && !link_exists(&interface)).then_some(())
        },
    );
    assert!(!procfs::is_alive(init));
}

/// One NIXL READ by a reader on this host from a source started with
/// `launcher` (empty: this host too); returns the reader's stdout+stderr.
fn nixl_read(python: &std::path::Path, launcher: &[String]) -> String {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let tool = root.join("fixtures/cpu-engine/tools/nixl_transport.py");
    // Metadata goes through files: /tmp is shared with the node (only its
    // /dev/shm is private).
    let dir = tempfile::tempdir().unwrap();
    let dir_arg = dir.path().display().to_string();
    let (program, prefix) = match launcher.split_first() {
        Some((p, rest)) => (p.clone(), rest.to_vec()),
        None => (python.display().to_string(), Vec::new()),
    };
    let mut source_args = prefix;
    if !launcher.is_empty() {
        source_args.push(python.display().to_string());
    }
    source_args.extend([tool.display().to_string(), "source".into(), dir_arg.clone()]);
    let mut source = Command::new(program)
        .args(&source_args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let reader = Command::new(python)
        .args([tool.display().to_string(), "reader".into(), dir_arg])
        .env("UCX_PROTO_INFO", "y")
        .output()
        .unwrap();
    let _ = source.wait();
    let out = String::from_utf8_lossy(&reader.stdout).into_owned()
        + &String::from_utf8_lossy(&reader.stderr);
    assert!(
        out.contains("\"state\": \"DONE\"") && out.contains("\"byte_exact\": true"),
        "the NIXL READ did not complete byte-exact: {}",
        out.lines().rev().take(5).collect::<Vec<_>>().join("\n")
    );
    out
}

fn a_read_from_node_1_crosses_the_veth_and_a_same_host_read_does_not() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = std::env::var_os("PHASE1_PYTHON").map(std::path::PathBuf::from);
    let env = kvcr_e2e::pyenv::ensure(root, python.as_deref()).expect("the pinned Python env");
    let logs = tempfile::tempdir().unwrap();
    let node = NamespaceNode::create("test-nixl", logs.path(), BUDGET).expect("a namespace node");

    let across = nixl_read(&env.python, &node.launcher());
    let transports = kvcr_e2e::proc::ucx::expect_network_read(&across, node.host_interface())
        .unwrap_or_else(|e| panic!("host <- node 1: {e}"));
    eprintln!("host <- node 1 read over {transports:?}");

    // The same read between two processes of one host must fail the check.
    let same_host = nixl_read(&env.python, &[]);
    let err = kvcr_e2e::proc::ucx::expect_network_read(&same_host, node.host_interface())
        .expect_err("a same-host read cannot pass as a network transfer");
    assert!(err.contains("shared memory"), "{err}");
}

/// A process placed on the node starts in its own working directory (the
/// vLLM workers' relative `--model` path depends on it), not at the root
/// where entering the node's mount namespace leaves it.
fn a_wrapped_process_starts_in_its_own_working_directory() {
    let logs = tempfile::tempdir().unwrap();
    let node = NamespaceNode::create("test-cwd", logs.path(), BUDGET).expect("a namespace node");
    let dir = tempfile::tempdir().unwrap();
    let log = logs.path().join("pwd.log");
    let spec = kvcr_e2e::proc::ProcessSpec::new("pwd", "sh", &log)
        .args(["-c", "pwd"])
        .cwd(dir.path());
    let wrapped = node.wrap(spec);
    let out = Command::new(&wrapped.program)
        .args(&wrapped.args)
        .output()
        .expect("nsenter runs");
    assert!(out.status.success(), "{wrapped:?}: {out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        dir.path().display().to_string(),
        "{}",
        wrapped.command_line()
    );
    node.stop();
}

/// TC-14's conditions on a real node's veth (src/proc/link_condition.rs):
/// each shows in its own counters under traffic to a listener on node 1,
/// a delay lengthens a TCP connect by at least the delay, traffic that
/// does not cross the link moves nothing (the "fault not applied" side),
/// and taking a condition off leaves no rule, qdisc or delayer.
fn each_degraded_link_condition_shows_in_its_counters_and_comes_off_clean() {
    use kvcr_e2e::proc::link_condition::{
        expect_applied, probe_connects, Degradation, LinkCondition,
    };
    use kvcr_e2e::proc::ProcessSpec;
    use std::io::Write;

    let logs = tempfile::tempdir().unwrap();
    let node =
        NamespaceNode::create("test-degrade", logs.path(), BUDGET).expect("a namespace node");
    // A listener on node 1 that answers every connection with 64 KiB (bulk
    // data out of node 1, through a rate cap's qdisc).
    let script = format!(
        "import socket\ns=socket.socket()\ns.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n\
         s.bind(('{}',0))\ns.listen(64)\nprint(s.getsockname()[1],flush=True)\n\
         while True:\n c,_=s.accept()\n try: c.sendall(b'x'*65536)\n except OSError: pass\n c.close()\n",
        node.addresses().node
    );
    let listener = kvcr_e2e::proc::Supervised::spawn(
        &node.wrap(
            ProcessSpec::new("listener", "python3", logs.path().join("listener.log"))
                .args(["-c", &script]),
        ),
    )
    .unwrap();
    let port: u16 = poll("the listener's port", BUDGET, || {
        listener.log_tail(1).trim().parse().ok()
    });
    let target = std::net::SocketAddr::from((node.addresses().node, port));
    let bulk = || {
        if let Ok(mut c) = std::net::TcpStream::connect_timeout(&target, Duration::from_secs(1)) {
            let _ = c.set_read_timeout(Some(Duration::from_secs(2)));
            let _ = c.write_all(b"x");
            let _ = std::io::copy(&mut c, &mut std::io::sink());
        }
    };
    // A listener on this host: traffic to it never crosses the veth.
    let local = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let local_addr = local.local_addr().unwrap();
    let clean = probe_connects(target, 10, Duration::from_secs(1));
    assert_eq!(clean.failed, 0, "the clean link answers: {clean:?}");

    for condition in [
        LinkCondition::Delay {
            delay_ms: 20,
            jitter_ms: 10,
        },
        LinkCondition::Loss { percent: 20.0 },
        LinkCondition::RateCap { kbit: 1000 },
    ] {
        let mut applied = Degradation::apply(
            &node,
            condition,
            std::path::Path::new(env!("CARGO_BIN_EXE_kvcr-e2e")),
            logs.path(),
        )
        .unwrap_or_else(|e| panic!("{}: {e}", condition.label()));
        let start = applied.counters();
        // Traffic that does not cross the link shows nothing.
        let off_link = probe_connects(local_addr, 10, Duration::from_millis(300));
        let unmoved = applied.counters();
        let not_applied = expect_applied(&condition, &start, &unmoved, &clean, &off_link);
        assert!(not_applied.is_err(), "{}: {unmoved:?}", condition.label());
        // Traffic across it does.
        poll(
            &format!("{} in its counters", condition.label()),
            BUDGET,
            || {
                let probe = probe_connects(target, 10, Duration::from_millis(500));
                bulk();
                expect_applied(&condition, &start, &applied.counters(), &clean, &probe).ok()
            },
        );
        let leftovers = applied.remove().unwrap_or_else(|e| panic!("{e}"));
        assert!(leftovers.is_empty(), "{leftovers:?}");
        let iface = node.node_interface();
        let rules = node.run_in_net("iptables", &["-S"]).unwrap();
        assert!(!rules.contains("-A "), "rules left: {rules}");
        let qdisc = node
            .run_in_net("tc", &["qdisc", "show", "dev", &iface])
            .unwrap();
        assert!(!qdisc.contains("tbf"), "qdisc left: {qdisc}");
    }
    let after = probe_connects(target, 10, Duration::from_secs(1));
    assert_eq!(after.failed, 0, "the link is clean again: {after:?}");
    listener.stop(Duration::from_secs(2));
}
