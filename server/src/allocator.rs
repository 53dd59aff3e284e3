//! Divides a host group's live hosts among its active bisects.
//!
//! Each bisect gets a share proportional to its priority (largest remainders, ties to the
//! older bisect, so every replica computes the same split), and at least one host, so a bisect
//! is never starved; with more bisects than hosts the queue then holds one task per bisect.
//! A bisect queues work only up to its share minus what it already has outstanding: no bisect
//! counts the group's hosts as its own, and the queue stays bounded by the group's size.

/// The share of `me` among `bisects` ((id, priority), any order) over `hosts` live hosts.
pub fn share(hosts: i64, bisects: &[(i64, i32)], me: i64) -> u32 {
    let hosts = hosts.max(1) as u64;
    let mut all: Vec<(i64, u64)> = bisects
        .iter()
        .map(|&(id, p)| (id, p.max(1) as u64))
        .collect();
    if !all.iter().any(|(id, _)| *id == me) {
        // Not (or no longer) active by the snapshot we read: count it as one more.
        all.push((me, 1));
    }
    all.sort_by_key(|(id, _)| *id);
    let total: u64 = all.iter().map(|(_, w)| w).sum();
    // Whole hosts first, then the remainder to the largest fractional parts.
    let mut shares: Vec<(i64, u64, u64)> = all
        .iter()
        .map(|&(id, w)| (id, hosts * w / total, (hosts * w) % total))
        .collect();
    let given: u64 = shares.iter().map(|s| s.1).sum();
    let mut order: Vec<usize> = (0..shares.len()).collect();
    order.sort_by(|&a, &b| {
        shares[b]
            .2
            .cmp(&shares[a].2)
            .then(shares[a].0.cmp(&shares[b].0))
    });
    for &i in order.iter().take((hosts - given) as usize) {
        shares[i].1 += 1;
    }
    shares
        .iter()
        .find(|s| s.0 == me)
        .map(|s| s.1.max(1) as u32)
        .unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::share;

    #[test]
    fn equal_priorities_split_the_hosts_and_every_host_is_given() {
        let bisects: Vec<(i64, i32)> = (1..=3).map(|id| (id, 1)).collect();
        let shares: Vec<u32> = (1..=3).map(|id| share(20, &bisects, id)).collect();
        assert_eq!(shares.iter().sum::<u32>(), 20);
        assert_eq!(shares, vec![7, 7, 6]);
    }

    #[test]
    fn priorities_weigh_the_shares() {
        let bisects = [(1, 1), (2, 3)];
        assert_eq!(share(8, &bisects, 1), 2);
        assert_eq!(share(8, &bisects, 2), 6);
    }

    #[test]
    fn more_bisects_than_hosts_gives_each_one_host() {
        let bisects: Vec<(i64, i32)> = (1..=200).map(|id| (id, 1)).collect();
        for id in [1, 100, 200] {
            assert_eq!(share(20, &bisects, id), 1);
        }
        // No host at all still lets a bisect ask for one (a worker may be on its way).
        assert_eq!(share(0, &bisects, 7), 1);
    }

    #[test]
    fn a_bisect_alone_gets_every_host() {
        assert_eq!(share(64, &[(5, 1)], 5), 64);
        assert_eq!(share(64, &[], 5), 64);
    }
}
