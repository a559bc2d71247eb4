//! `outboard bench link` as root: a short run of both links, checked for the
//! JSON shape, that every figure is positive, that the sinks consumed what the
//! clients wrote (the bench itself fails otherwise) and that the lab is gone
//! afterwards; and the refusal of af_xdp above its MTU limit.

// Tests are the imperative shell: they may read the wall clock (support/ does too).
#![allow(clippy::disallowed_methods)]

mod support;

use serde_json::Value;
use std::process::Command;
use std::time::Instant;
use support::netns::{have, lab_name, namespaces_of, skip_unless_root};
use support::{num, positive, OUTBOARD};

#[test]
fn bench_link_both_links_json() {
    if skip_unless_root("bench_link_both_links_json") {
        return;
    }
    for tool in ["ip", "ethtool", "timeout"] {
        assert!(
            have(tool),
            "`{tool}` not found: apt-get install iproute2 ethtool coreutils"
        );
    }
    let lab = lab_name("bl");
    let t0 = Instant::now();
    let out = Command::new("timeout")
        .args([
            "180",
            OUTBOARD,
            "bench",
            "link",
            "--link",
            "both",
            "--seconds",
            "1",
            "--json",
            "--lab-name",
            &lab,
        ])
        .output()
        .expect("run outboard bench link");
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!(
        "bench link took {:.1} s; stderr: {stderr}",
        t0.elapsed().as_secs_f64()
    );
    assert!(
        out.status.success(),
        "bench link failed ({}): {stderr}",
        out.status
    );
    assert!(
        namespaces_of(&lab).is_empty(),
        "lab {lab} left behind: {:?}",
        namespaces_of(&lab)
    );
    let r: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    eprintln!("{}", serde_json::to_string_pretty(&r).unwrap());

    assert_eq!(r["mtu"], 1500);
    assert_eq!(r["lab"], lab.as_str());
    assert!(r["command"].as_str().unwrap().contains("--link both"));
    positive(&r, "seconds_per_case");
    positive(&r, "machine.nproc");
    assert!(!r["machine"]["cpu_model"].as_str().unwrap().is_empty());
    assert!(!r["machine"]["kernel"].as_str().unwrap().is_empty());
    for iface in ["eng0", "lnx0"] {
        for k in [
            "tx-checksumming",
            "tcp-segmentation-offload",
            "generic-segmentation-offload",
            "generic-receive-offload",
        ] {
            let v = r["offloads"][iface][k]
                .as_str()
                .unwrap_or_else(|| panic!("offloads.{iface}.{k} missing"));
            assert!(
                v.starts_with("on") || v.starts_with("off"),
                "offloads.{iface}.{k} = {v}"
            );
        }
    }
    // The lab turns TX checksum offload off on the Linux end.
    assert!(r["offloads"]["lnx0"]["tx-checksumming"]
        .as_str()
        .unwrap()
        .starts_with("off"));
    assert_eq!(r["skipped"].as_array().unwrap().len(), 0);

    let results = r["results"].as_array().expect("results");
    let links: Vec<&str> = results
        .iter()
        .map(|x| x["link"].as_str().unwrap())
        .collect();
    assert_eq!(links, ["af_xdp", "af_packet"]);
    for res in results {
        let link = res["link"].as_str().unwrap();
        assert_eq!(res["engine"]["link"], link);
        assert_eq!(res["engine"]["mtu"], 1500);
        for side in ["engine", "linux"] {
            for k in [
                "bytes",
                "seconds",
                "mbit_s",
                "eng0_rx_frames",
                "eng0_rx_mean_frame_bytes",
            ] {
                positive(res, &format!("{side}.throughput.{k}"));
            }
            for k in [
                "transactions",
                "seconds",
                "transactions_per_s",
                "mean_us",
                "p50_us",
                "p99_us",
            ] {
                positive(res, &format!("{side}.round_trip.{k}"));
            }
            assert!(
                num(res, &format!("{side}.round_trip.p50_us"))
                    <= num(res, &format!("{side}.round_trip.p99_us"))
            );
            // 1 s of writing at no less than a few Mbit/s.
            assert!(
                num(res, &format!("{side}.throughput.bytes")) >= 1e6,
                "{link} {side}: too few bytes"
            );
        }
        for k in [
            "bytes",
            "seconds",
            "mbit_s",
            "eng0_rx_frames",
            "eng0_rx_mean_frame_bytes",
        ] {
            positive(res, &format!("linux.throughput_lnx0_tx_offload_on.{k}"));
        }
        assert!(res["linux"]["lnx0_offloads_then"]["tx-checksumming"]
            .as_str()
            .unwrap()
            .starts_with("on"));
        // The engine moves MTU-sized frames: nothing received on eng0 is bigger on average.
        assert!(num(res, "engine.throughput.eng0_rx_mean_frame_bytes") <= 1514.0 + 1.0);
        for k in ["throughput_cpu", "round_trip_cpu"] {
            positive(res, &format!("engine.{k}.cpu_s"));
            positive(res, &format!("engine.{k}.wall_s"));
            positive(res, &format!("engine.{k}.utilisation"));
            assert!(
                num(res, &format!("engine.{k}.utilisation")) <= 1.2,
                "{link} {k}: one shard, one thread"
            );
        }
        let rows = res["rows"].as_array().expect("rows");
        assert_eq!(rows.len(), 5, "{link}: rows {rows:?}");
        for row in rows {
            assert!(!row["case"].as_str().unwrap().is_empty());
            for k in ["ours", "linux", "ratio"] {
                let x = row[k].as_f64().unwrap_or(0.0);
                assert!(
                    x > 0.0 && x.is_finite(),
                    "{link} {}: {k} = {x}",
                    row["case"]
                );
            }
            let ratio = num(row, "ratio");
            assert!((ratio - num(row, "ours") / num(row, "linux")).abs() < 1e-9 * ratio.max(1.0));
        }
    }
}

#[test]
fn bench_link_refuses_af_xdp_above_its_mtu() {
    if skip_unless_root("bench_link_refuses_af_xdp_above_its_mtu") {
        return;
    }
    let lab = lab_name("blx");
    let out = Command::new("timeout")
        .args([
            "60",
            OUTBOARD,
            "bench",
            "link",
            "--link",
            "af_xdp",
            "--mtu",
            "9000",
            "--lab-name",
            &lab,
        ])
        .output()
        .expect("run outboard bench link");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "expected exit 2: {stderr}");
    assert!(
        stderr.contains("3498") && stderr.contains("af_packet"),
        "{stderr}"
    );
    assert!(
        namespaces_of(&lab).is_empty(),
        "no lab should have been built"
    );
}
