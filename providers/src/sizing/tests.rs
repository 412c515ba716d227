//! Sizes checked against a host, and the host read from /proc/meminfo.

use super::*;

fn host() -> Host {
    Host {
        cpus: 2.0,
        memory_mb: 8000,
    }
}

/// A change to one size of [`Limits::default`].
type SetSize = fn(&mut Limits);

#[test]
fn sizes_out_of_range_are_refused_naming_the_field_and_the_limit() {
    let h = host();
    // Each case is the defaults but for the one size it sets; the words
    // open with the field they name.
    let cases: [(SetSize, &str); 7] = [
        (|l| l.cpus = 0.2, "cpus 0.2 is under the least, 0.25"),
        (|l| l.cpus = 3.0, "cpus 3 is over this host's 2 CPUs"),
        (|l| l.cpus = f64::NAN, "cpus must be a number"),
        (
            |l| l.memory_mb = 63,
            "memoryMb 63 is under the least, 64 MiB",
        ),
        (
            |l| l.memory_mb = 8001,
            "memoryMb 8001 is over this host's memory, 8000 MiB",
        ),
        (|l| l.pids = 15, "pids 15 is under the least, 16"),
        (|l| l.pids = 32769, "pids 32769 is over the most, 32768"),
    ];
    for (set, words) in cases {
        let mut l = Limits::default();
        set(&mut l);
        let field = words.split(' ').next();
        let e = l.check(&h).unwrap_err();
        assert_eq!(
            (e.code, e.field.as_deref(), e.message.as_str()),
            (crate::types::ErrorCode::Invalid, field, words)
        );
    }
    let edge = Limits {
        cpus: 0.25,
        memory_mb: 64,
        pids: 16,
    };
    assert_eq!(edge.check(&h), Ok(()));
    assert_eq!(edge.to_string(), "cpus 0.25, memoryMb 64, pids 16");
    let edge = Limits {
        cpus: 2.0,
        memory_mb: 8000,
        pids: 32768,
    };
    assert_eq!(edge.check(&h), Ok(()));
}

#[test]
fn sizes_left_out_are_the_seeds_defaults_lowered_to_the_host() {
    let small = Host {
        cpus: 1.0,
        memory_mb: 2000,
    };
    let big = Host {
        cpus: 16.0,
        memory_mb: 64_000,
    };
    for (host, cpus, memory_mb) in [(&big, 2.0, 4096), (&small, 1.0, 2000)] {
        assert_eq!(
            Limits::from_sizes(&Sizes::default(), host),
            Ok(Limits {
                cpus,
                memory_mb,
                pids: 1024
            })
        );
    }
    let asked = Sizes {
        cpus: Some(0.5),
        memory_mb: Some(256),
        disk_mb: Some(10),
        pids: Some(64),
    };
    assert_eq!(
        Limits::from_sizes(&asked, &small),
        Ok(Limits {
            cpus: 0.5,
            memory_mb: 256,
            pids: 64
        })
    );
    let too_many = Sizes {
        cpus: Some(4.0),
        ..Sizes::default()
    };
    assert_eq!(
        Limits::from_sizes(&too_many, &small).unwrap_err().message,
        "cpus 4 is over this host's 1 CPUs"
    );
}

#[test]
fn host_memory_is_memtotal_in_mib() {
    let h = Host::from_meminfo("MemTotal:       24576000 kB\nMemFree:  1 kB\n", 2).unwrap();
    assert_eq!(
        h,
        Host {
            cpus: 2.0,
            memory_mb: 24000
        }
    );
    assert_eq!(
        Host::from_meminfo("MemFree: 1 kB\n", 2)
            .unwrap_err()
            .message,
        "/proc/meminfo has no MemTotal line"
    );
}
