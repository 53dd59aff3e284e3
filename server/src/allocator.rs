//! Divides a host group's live hosts among its active bisects.
//!
//! Each bisect gets a share proportional to its priority (largest remainders, ties to the
//! older bisect, so every replica computes the same split), and at least one host, so a bisect
//! is never starved; with more bisects than hosts the queue then holds one task per bisect.
//! A bisect queues work only up to its share minus what it already has outstanding: no bisect
//! counts the group's hosts as its own, and the queue stays bounded by the group's size.
//!
//! No share exceeds the cap (`--max-hosts-per-bisect`): hosts beyond a capped bisect's cap go
//! to the others (water-filling), and hosts beyond every cap stay idle. The cap is there
//! because parallel probes buy little time and cost runs: in bisect-sim (499 candidates, a
//! +5% step at 1% noise, 200 trials) 1, 2, 4 and 8 hosts take 12, 8, 6 and 5 rounds (median)
//! for 26.9, 28.9, 33.3 and 39.9 runs (mean).

/// The default cap: past 4 hosts a bisect saves about one round in six for 20% more runs.
pub const DEFAULT_MAX_HOSTS_PER_BISECT: u32 = 4;

/// Proportional whole shares of `hosts` among `all` ((id, weight), sorted by id): whole hosts
/// first, then the remainder to the largest fractional parts, ties to the lower id.
fn split(hosts: u64, all: &[(i64, u64)]) -> Vec<u64> {
    let total: u64 = all.iter().map(|(_, w)| w).sum::<u64>().max(1);
    let mut shares: Vec<(u64, u64)> = all
        .iter()
        .map(|&(_, w)| (hosts * w / total, (hosts * w) % total))
        .collect();
    let given: u64 = shares.iter().map(|s| s.0).sum();
    let mut order: Vec<usize> = (0..shares.len()).collect();
    order.sort_by(|&a, &b| shares[b].1.cmp(&shares[a].1).then(all[a].0.cmp(&all[b].0)));
    for &i in order.iter().take((hosts - given) as usize) {
        shares[i].0 += 1;
    }
    shares.into_iter().map(|s| s.0).collect()
}

/// The share of `me` among `bisects` ((id, priority), any order) over `hosts` live hosts,
/// at most `cap` (and at least one).
pub fn share(hosts: i64, bisects: &[(i64, i32)], me: i64, cap: u32) -> u32 {
    let cap = u64::from(cap.max(1));
    let mut hosts = hosts.max(1) as u64;
    let mut all: Vec<(i64, u64)> = bisects
        .iter()
        .map(|&(id, p)| (id, p.max(1) as u64))
        .collect();
    if !all.iter().any(|(id, _)| *id == me) {
        // Not (or no longer) active by the snapshot we read: count it as one more.
        all.push((me, 1));
    }
    all.sort_by_key(|(id, _)| *id);
    // Water-filling: a bisect whose share reaches the cap takes the cap and leaves the
    // split; the others divide what is left. Each pass removes at least one bisect.
    loop {
        let shares = split(hosts, &all);
        let capped: Vec<usize> = (0..all.len()).filter(|&i| shares[i] >= cap).collect();
        let mine = all.iter().position(|(id, _)| *id == me);
        if capped.is_empty() || mine.is_some_and(|i| shares[i] >= cap) {
            return match mine {
                Some(i) => shares[i].clamp(1, cap) as u32,
                None => 1,
            };
        }
        for &i in capped.iter().rev() {
            all.remove(i);
            hosts = hosts.saturating_sub(cap);
        }
        if hosts == 0 {
            return 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::share;

    const NO_CAP: u32 = u32::MAX;

    #[test]
    fn equal_priorities_split_the_hosts_and_every_host_is_given() {
        let bisects: Vec<(i64, i32)> = (1..=3).map(|id| (id, 1)).collect();
        let shares: Vec<u32> = (1..=3).map(|id| share(20, &bisects, id, NO_CAP)).collect();
        assert_eq!(shares.iter().sum::<u32>(), 20);
        assert_eq!(shares, vec![7, 7, 6]);
    }

    #[test]
    fn priorities_weigh_the_shares() {
        let bisects = [(1, 1), (2, 3)];
        assert_eq!(share(8, &bisects, 1, NO_CAP), 2);
        assert_eq!(share(8, &bisects, 2, NO_CAP), 6);
    }

    #[test]
    fn more_bisects_than_hosts_gives_each_one_host() {
        let bisects: Vec<(i64, i32)> = (1..=200).map(|id| (id, 1)).collect();
        for id in [1, 100, 200] {
            assert_eq!(share(20, &bisects, id, NO_CAP), 1);
        }
        // No host at all still lets a bisect ask for one (a worker may be on its way).
        assert_eq!(share(0, &bisects, 7, NO_CAP), 1);
    }

    #[test]
    fn a_bisect_alone_gets_every_host() {
        assert_eq!(share(64, &[(5, 1)], 5, NO_CAP), 64);
        assert_eq!(share(64, &[], 5, NO_CAP), 64);
    }

    #[test]
    fn a_capped_share_leaves_its_hosts_to_the_others() {
        // One bisect alone on 64 hosts takes only the cap; the rest stay idle.
        assert_eq!(share(64, &[(5, 1)], 5, 4), 4);
        // A high-priority bisect is held at the cap and the others split what it leaves.
        let bisects = [(1, 10), (2, 1), (3, 1)];
        assert_eq!(share(12, &bisects, 1, 4), 4);
        assert_eq!(share(12, &bisects, 2, 4), 4);
        assert_eq!(share(12, &bisects, 3, 4), 4);
        let bisects = [(1, 10), (2, 1), (3, 1)];
        let shares: Vec<u32> = (1..=3).map(|id| share(9, &bisects, id, 4)).collect();
        assert_eq!(shares, vec![4, 3, 2]);
        // Without the cap the priority takes nearly everything.
        let shares: Vec<u32> = (1..=3).map(|id| share(9, &bisects, id, NO_CAP)).collect();
        assert_eq!(shares, vec![7, 1, 1]);
    }

    #[test]
    fn the_cap_never_gives_more_hosts_than_there_are() {
        for hosts in 0..40i64 {
            for n in 1..12i64 {
                for uneven in [false, true] {
                    let weight = |id: i64| if uneven { (id % 3 + 1) as i32 } else { 1 };
                    let bisects: Vec<(i64, i32)> = (1..=n).map(|id| (id, weight(id))).collect();
                    let shares: Vec<u32> =
                        (1..=n).map(|id| share(hosts, &bisects, id, 3)).collect();
                    let total: u32 = shares.iter().sum();
                    assert!(
                        shares.iter().all(|&s| (1..=3).contains(&s)),
                        "{hosts} {n} {shares:?}"
                    );
                    // Every host is given while some bisect is below the cap.
                    let want = (hosts.max(1) as u32).min(3 * n as u32);
                    assert!(total >= want, "{hosts} hosts, {n} bisects: {shares:?}");
                    // Equal priorities never give a host twice (uneven ones may lift a
                    // zero share to the one host every bisect keeps).
                    if !uneven {
                        assert!(
                            total <= want.max(n as u32),
                            "{hosts} hosts, {n}: {shares:?}"
                        );
                    }
                }
            }
        }
    }
}
