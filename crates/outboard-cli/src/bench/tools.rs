//! What `outboard bench apps` and the shim's application tests
//! (`tests/shim_apps.rs`) read from the unmodified tools they drive — wrk,
//! redis-benchmark, iperf3, sockperf and pgbench — and the nginx
//! configuration and PostgreSQL cluster both run. Pure functions of text,
//! with no I/O but `nginx_conf`'s one write and `postgres_cluster`'s
//! `initdb`: the tests include this file by path, since the CLI is a binary
//! crate.
//! A report that shows any error, or measured nothing, is an `Err` naming
//! the tool and quoting its output.

use std::path::{Path, PathBuf};

/// wrk's report.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Wrk {
    pub requests: u64,
    pub per_s: f64,
}

/// wrk: fails on socket errors, non-2xx/3xx answers, or no requests.
pub fn wrk(out: &str, err: &str) -> Result<Wrk, String> {
    if out.contains("Socket errors") || out.contains("Non-2xx") {
        return Err(format!("wrk saw errors:\n{out}\n{err}"));
    }
    let requests = out
        .lines()
        .find(|l| l.contains(" requests in "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse::<u64>().ok());
    let per_s = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse::<f64>().ok());
    match (requests, per_s) {
        (Some(requests), Some(per_s)) if requests > 0 && per_s > 0.0 => Ok(Wrk { requests, per_s }),
        _ => Err(format!("wrk reported no requests:\n{out}\n{err}")),
    }
}

/// `redis-benchmark -q`: requests per second of `test` (`SET`, `GET`, …);
/// fails on any error, refusal or reset in the output.
pub fn redis_benchmark(out: &str, err: &str, test: &str) -> Result<f64, String> {
    let all = format!("{out}\n{err}");
    let lower = all.to_ascii_lowercase();
    if lower.contains("error") || lower.contains("refused") || lower.contains("reset") {
        return Err(format!("redis-benchmark reported an error:\n{all}"));
    }
    let prefix = format!("{test}: ");
    all.split(['\r', '\n'])
        .filter_map(|l| l.trim().strip_prefix(prefix.as_str()))
        .filter(|r| r.contains("requests per second"))
        .filter_map(|r| r.split_whitespace().next().and_then(|v| v.parse::<f64>().ok()))
        .next_back()
        .filter(|v| *v > 0.0)
        .ok_or_else(|| format!("redis-benchmark reported no {test} requests per second:\n{all}"))
}

/// memcaslap's summary line (`Run time: 3.0s Ops: 264180 TPS: 88048 Net_rate: …`):
/// operations per second; fails without one, or with none done.
pub fn memcaslap(out: &str, err: &str) -> Result<f64, String> {
    let all = format!("{out}\n{err}");
    all.lines()
        .filter(|l| l.trim_start().starts_with("Run time:"))
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            w.by_ref().find(|t| *t == "TPS:")?;
            w.next()?.parse::<f64>().ok()
        })
        .next_back()
        .filter(|v| *v > 0.0)
        .ok_or_else(|| format!("memcaslap reported no operations per second:\n{all}"))
}

/// iperf3's `-J` report: what the receiver got.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Iperf3 {
    pub bytes: u64,
    pub bits_per_s: f64,
}

/// iperf3 -J: fails on an `error` key or nothing received.
pub fn iperf3(out: &str, err: &str) -> Result<Iperf3, String> {
    let v: serde_json::Value =
        serde_json::from_str(out).map_err(|e| format!("iperf3 -J printed no JSON ({e}):\n{out}\n{err}"))?;
    if let Some(e) = v.get("error") {
        return Err(format!("iperf3: {e}"));
    }
    let r = &v["end"]["sum_received"];
    match (r["bytes"].as_u64(), r["bits_per_second"].as_f64()) {
        (Some(bytes), Some(bits_per_s)) if bytes > 0 && bits_per_s > 0.0 => Ok(Iperf3 { bytes, bits_per_s }),
        _ => Err(format!("iperf3 received nothing: {}", v["end"])),
    }
}

/// sockperf ping-pong's report; latencies in µs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sockperf {
    pub observations: u64,
    pub avg_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
}

/// sockperf ping-pong: fails on an ERROR line or no observations.
pub fn sockperf(out: &str, err: &str) -> Result<Sockperf, String> {
    let all = strip_ansi(&format!("{out}\n{err}"));
    if all.contains("ERROR") {
        return Err(format!("sockperf reported an error:\n{all}"));
    }
    let after = |key: &str| -> Option<f64> {
        all.lines().find_map(|l| {
            let i = l.find(key)?;
            l[i + key.len()..]
                .trim_start_matches([' ', '='])
                .split(|c: char| !(c.is_ascii_digit() || c == '.'))
                .next()?
                .parse()
                .ok()
        })
    };
    let observations = all.lines().find_map(|l| {
        let (n, rest) = l.split("Total ").nth(1)?.split_once(' ')?;
        rest.starts_with("observations").then(|| n.parse::<u64>().ok()).flatten()
    });
    let r = (
        observations,
        after("avg-latency="),
        after("percentile 50.000"),
        after("percentile 99.000"),
    );
    match r {
        (Some(observations), Some(avg_us), Some(p50_us), Some(p99_us))
            if observations > 0 && avg_us > 0.0 && p50_us > 0.0 && p99_us > 0.0 =>
        {
            Ok(Sockperf { observations, avg_us, p50_us, p99_us })
        }
        _ => Err(format!("sockperf measured nothing:\n{all}")),
    }
}

/// `s` without its ANSI escape sequences (sockperf colours its report).
fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars();
    while let Some(c) = it.next() {
        if c == '\x1b' {
            for d in it.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// redis-server's command line for a throwaway server in the foreground:
/// `port` on every address, no persistence, no protected mode, its files
/// under `dir`.
pub fn redis_server_cmd(port: u16, dir: &Path) -> Vec<String> {
    let (port, dir) = (port.to_string(), dir.display().to_string());
    [
        "redis-server", "--port", &port, "--bind", "0.0.0.0", "--save", "", "--appendonly", "no",
        "--protected-mode", "no", "--daemonize", "no", "--dir", &dir,
    ]
    .map(String::from)
    .to_vec()
}

/// Writes `dir/nginx.conf`: one worker serving `dir/www` on `port`, with its
/// logs, pid and temporary files under `dir` (so it runs as root without
/// touching /var).
pub fn nginx_conf(dir: &Path, port: u16) -> Result<PathBuf, String> {
    let d = dir.display();
    let conf = format!(
        "worker_processes 1;\nerror_log {d}/error.log warn;\npid {d}/nginx.pid;\n\
         events {{ worker_connections 256; }}\n\
         http {{\n  access_log off;\n  sendfile on;\n  keepalive_timeout 30;\n\
           client_body_temp_path {d}/client_body;\n  proxy_temp_path {d}/proxy;\n\
           fastcgi_temp_path {d}/fastcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n\
           server {{ listen {port}; root {d}/www; }}\n}}\n"
    );
    let p = dir.join("nginx.conf");
    std::fs::write(&p, conf).map_err(|e| format!("write {}: {e}", p.display()))?;
    Ok(p)
}

/// pgbench's transactions per second; fails on a failed transaction, an
/// error, or no rate.
pub fn pgbench(out: &str, err: &str) -> Result<f64, String> {
    if !out.contains("number of failed transactions: 0 ") || err.contains("error") {
        return Err(format!("pgbench saw errors:\n{out}\n{err}"));
    }
    out.lines()
        .find_map(|l| l.strip_prefix("tps = "))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|t| *t > 0.0)
        .ok_or_else(|| format!("pgbench reported no rate:\n{out}\n{err}"))
}

/// The PostgreSQL server's directory, the newest there is (Debian's
/// `postgresql` package puts it in `/usr/lib/postgresql/VERSION/bin`, not on
/// PATH).
pub fn postgres_bin_dir() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("bin"))
        .filter(|b| b.join("postgres").is_file() && b.join("initdb").is_file())
        .collect();
    dirs.sort();
    dirs.pop()
}

/// A new PostgreSQL cluster in `data` (created and given to the `postgres`
/// user, `initdb` run as that user): listening on every address at `port`,
/// its socket in `data`, trusting clients from `clients` (a CIDR), with no
/// fsync (a benchmark of the network path, not of the disk). Returns the
/// command line that serves it in the foreground as `postgres` (`setpriv`:
/// the server refuses to run as root).
pub fn postgres_cluster(bin: &Path, data: &Path, port: u16, clients: &str) -> Result<Vec<String>, String> {
    let run = |what: &str, c: &mut std::process::Command| -> Result<(), String> {
        let o = c.output().map_err(|e| format!("{what}: {e}"))?;
        if o.status.success() {
            Ok(())
        } else {
            Err(format!("{what}: {}\n{}{}", o.status, String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)))
        }
    };
    std::fs::create_dir_all(data).map_err(|e| format!("create {}: {e}", data.display()))?;
    run("chown the data directory to postgres", std::process::Command::new("chown").arg("postgres:postgres").arg(data))?;
    let as_postgres = ["setpriv", "--reuid", "postgres", "--regid", "postgres", "--init-groups"];
    run(
        "initdb",
        std::process::Command::new("timeout").arg("120").args(as_postgres).arg(bin.join("initdb")).arg("-D").arg(data).args([
            "-A", "trust", "-U", "postgres", "--no-sync",
        ]),
    )?;
    let conf = data.join("postgresql.conf");
    let mut text = std::fs::read_to_string(&conf).map_err(|e| format!("read {}: {e}", conf.display()))?;
    text.push_str(&format!(
        "\nlisten_addresses = '*'\nport = {port}\nunix_socket_directories = '{}'\nmax_connections = 40\n\
         shared_buffers = 16MB\nfsync = off\nsynchronous_commit = off\n",
        data.display()
    ));
    std::fs::write(&conf, text).map_err(|e| format!("write {}: {e}", conf.display()))?;
    let hba = data.join("pg_hba.conf");
    std::fs::write(&hba, format!("local all all trust\nhost all all {clients} trust\n")).map_err(|e| format!("write {}: {e}", hba.display()))?;
    let mut cmd: Vec<String> = as_postgres.map(String::from).to_vec();
    cmd.extend([bin.join("postgres").display().to_string(), "-D".into(), data.display().to_string()]);
    Ok(cmd)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pgbench_report() {
        let pb = "transaction type: <builtin: select only>\nnumber of transactions actually processed: 102847\nnumber of failed transactions: 0 (0.000%)\nlatency average = 0.155 ms\ninitial connection time = 14.097 ms\ntps = 51923.324642 (without initial connection time)\n";
        assert_eq!(pgbench(pb, ""), Ok(51923.324642));
        assert!(pgbench(&pb.replace("failed transactions: 0 ", "failed transactions: 3 "), "").is_err());
        assert!(pgbench(pb, "pgbench: error: connection to server failed").is_err());
        assert!(pgbench("number of failed transactions: 0 (0.000%)\n", "").is_err());
    }

    #[test]
    fn memcaslap_report() {
        let o = "cmd_get: 158611\ncmd_set: 17631\n\nRun time: 2.0s Ops: 176242 TPS: 88114 Net_rate: 98.6M/s\n";
        assert_eq!(memcaslap(o, ""), Ok(88114.0));
        assert!(memcaslap("Run time: 2.0s Ops: 0 TPS: 0 Net_rate: 0.0M/s", "").is_err());
        assert!(memcaslap("", "connect failed").is_err());
    }

    #[test]
    fn wrk_report() {
        let w = "Running 2s test @ http://10.0.0.2:8080/x\n  2 threads and 16 connections\n  199767 requests in 2.10s, 45.15MB read\nRequests/sec:  95167.61\n";
        assert_eq!(wrk(w, ""), Ok(Wrk { requests: 199767, per_s: 95167.61 }));
        let e = format!("{w}  Socket errors: connect 0, read 3, write 0, timeout 0\n");
        assert!(wrk(&e, "").unwrap_err().contains("read 3"));
        assert!(wrk(&format!("{w}  Non-2xx or 3xx responses: 7\n"), "").is_err());
        assert!(wrk("unable to connect to 10.0.0.2:8080", "").is_err());
    }

    #[test]
    fn redis_benchmark_report() {
        let rb = "\rSET: rps=0.0 (overall: -nan) avg_msec=-nan\r\rSET: 114285.72 requests per second, p50=0.215 msec\n\rGET: rps=37152.0 (overall: 125513.5) avg_msec=0.219\r\rGET: 129032.26 requests per second, p50=0.215 msec\n";
        assert_eq!(redis_benchmark(rb, "", "SET"), Ok(114285.72));
        assert_eq!(redis_benchmark(rb, "", "GET"), Ok(129032.26));
        assert!(redis_benchmark(rb, "", "LPUSH").is_err());
        assert!(redis_benchmark(rb, "Error: Connection reset by peer", "GET").is_err());
    }

    #[test]
    fn iperf3_report() {
        let ip = r#"{"start":{},"end":{"sum_received":{"bytes":1000,"bits_per_second":2.5e9}}}"#;
        assert_eq!(iperf3(ip, ""), Ok(Iperf3 { bytes: 1000, bits_per_s: 2.5e9 }));
        assert!(iperf3(r#"{"error":"unable to connect"}"#, "").unwrap_err().contains("unable to connect"));
        assert!(iperf3(r#"{"end":{"sum_received":{"bytes":0,"bits_per_second":0}}}"#, "").is_err());
        assert!(iperf3("iperf3: error", "").is_err());
    }

    #[test]
    fn sockperf_report() {
        let sp = "sockperf: \x1b[2;35m====> avg-latency=3.311 (std-dev=3.018)\x1b[0m\nsockperf: \x1b[2;35mTotal 232842 observations\x1b[0m; each\nsockperf: ---> percentile 99.000 =    4.835\nsockperf: ---> percentile 50.000 =    3.206\n";
        let want = Sockperf { observations: 232842, avg_us: 3.311, p50_us: 3.206, p99_us: 4.835 };
        assert_eq!(sockperf(sp, ""), Ok(want));
        assert!(sockperf("sockperf: \x1b[31mERROR: connect failed\x1b[0m", "").is_err());
        assert!(sockperf("sockperf: Total 0 observations", "").is_err());
    }
}
