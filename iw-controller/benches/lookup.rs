//! IW-table lookup cost (issue 6 target: <= 200 ns per lookup) on ~100k ranges built from the
//! synthetic geolocation database, with random client addresses (hits and misses).

#![allow(missing_docs)]

use std::hint::black_box;
use std::net::Ipv4Addr;
use std::sync::Arc;

use ccp_algorithms::api::SplitMix64;
use criterion::{Criterion, criterion_group, criterion_main};
use iw_controller::geo::{GeoDb, SyntheticGeo};
use iw_controller::table::{IwTable, TableHandle};

fn table() -> (IwTable, Vec<Ipv4Addr>) {
    // 30 provinces x 5 ISPs x 700 subnets = 105,000 ranges.
    let geo = GeoDb::synthetic(&SyntheticGeo {
        provinces: 30,
        isps_per_province: 5,
        subnets_per_isp: 700,
        range_len: (64, 1024),
        gap: (0, 64),
        ..SyntheticGeo::default()
    });
    let ranges: Vec<_> = geo
        .ranges()
        .enumerate()
        .map(|(i, (s, e, _))| (s, e, 1 + (i as u32 * 7919) % 60))
        .collect();
    let last = ranges.last().map_or(0, |r| u32::from(r.1));
    let table = IwTable::new(ranges, 10, 200).unwrap_or_else(|_| IwTable::uniform(10, 200));
    // Random addresses spread over the covered space plus a margin of misses.
    let mut rng = SplitMix64::new(0x1234_5678);
    let ips = (0..4096)
        .map(|_| {
            let z = rng.next_u64();
            let span = u64::from(last - 0x0100_0000) + 1_000_000;
            Ipv4Addr::from(0x0100_0000 + (z % span) as u32)
        })
        .collect();
    (table, ips)
}

fn bench(c: &mut Criterion) {
    let (table, ips) = table();
    eprintln!("IW table: {} ranges after compaction", table.len());
    let mut i = 0usize;
    c.bench_function("iw_table_lookup_100k", |b| {
        b.iter(|| {
            i = (i + 1) & 4095;
            black_box(table.lookup(black_box(ips[i])))
        });
    });
    let handle = TableHandle::new(table);
    handle.publish(Arc::new(handle.load().as_ref().clone()));
    let mut j = 0usize;
    c.bench_function("iw_table_handle_lookup_100k", |b| {
        b.iter(|| {
            j = (j + 1) & 4095;
            black_box(handle.lookup(black_box(ips[j])))
        });
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
