//! Sizes checked against a host, and the host read from /proc/meminfo.

use super::*;

fn host() -> Host {
    Host {
        cpus: 2.0,
        memory_mb: 8000,
    }
}

#[test]
fn sizes_out_of_range_are_refused_naming_the_field_and_the_limit() {
    let h = host();
    let cases = [
        (
            Limits {
                cpus: 0.2,
                ..Limits::default()
            },
            "cpus",
            "cpus 0.2 is under the least, 0.25",
        ),
        (
            Limits {
                cpus: 3.0,
                ..Limits::default()
            },
            "cpus",
            "cpus 3 is over this host's 2 CPUs",
        ),
        (
            Limits {
                cpus: f64::NAN,
                ..Limits::default()
            },
            "cpus",
            "cpus must be a number",
        ),
        (
            Limits {
                memory_mb: 63,
                ..Limits::default()
            },
            "memoryMb",
            "memoryMb 63 is under the least, 64 MiB",
        ),
        (
            Limits {
                memory_mb: 8001,
                ..Limits::default()
            },
            "memoryMb",
            "memoryMb 8001 is over this host's memory, 8000 MiB",
        ),
        (
            Limits {
                pids: 15,
                ..Limits::default()
            },
            "pids",
            "pids 15 is under the least, 16",
        ),
        (
            Limits {
                pids: 32769,
                ..Limits::default()
            },
            "pids",
            "pids 32769 is over the most, 32768",
        ),
    ];
    for (l, field, words) in cases {
        let e = l.check(&h).unwrap_err();
        assert_eq!(
            (e.code, e.field.as_deref(), e.message.as_str()),
            (crate::types::ErrorCode::Invalid, Some(field), words)
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
    let big = Host {
        cpus: 16.0,
        memory_mb: 64_000,
    };
    assert_eq!(
        Limits::from_sizes(&Sizes::default(), &big),
        Ok(Limits {
            cpus: 2.0,
            memory_mb: 4096,
            pids: 1024
        })
    );
    let small = Host {
        cpus: 1.0,
        memory_mb: 2000,
    };
    assert_eq!(
        Limits::from_sizes(&Sizes::default(), &small),
        Ok(Limits {
            cpus: 1.0,
            memory_mb: 2000,
            pids: 1024
        })
    );
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
