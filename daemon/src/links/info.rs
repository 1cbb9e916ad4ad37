//! LINK_INFO: a link with its visit statistics (stored + still buffered).

use super::record::{FLAG_ALIAS, FLAG_DROP_QUERY, FLAG_PERMANENT};
use super::visits::{day_of, load_stats};
use super::Links;
use crate::shard::txn::Txn;
use bytes::Bytes;
use rush_protocol::cmd::{LinkInfo, LinkInfoReply};
use rush_protocol::{Reply, RushError};

impl Links {
    pub(super) fn info(
        &mut self,
        r: &LinkInfo,
        now: u64,
        txn: &mut Txn,
    ) -> Result<Reply, RushError> {
        let code = r.code.as_bytes();
        let link = self.live(&r.code, now, txn)?;
        let mut stats = load_stats(link.slot, code, txn)?;
        let today = day_of(now);
        if let Some(p) = self.visits.pending(code) {
            p.merge_into(&mut stats, today);
        }
        stats.prune(today);
        let rec = link.record;
        Ok(Reply::LinkInfo(LinkInfoReply {
            code: r.code.clone(),
            short_url: self.short_url(&r.code),
            permanent: rec.has(FLAG_PERMANENT),
            alias: rec.has(FLAG_ALIAS),
            drop_query: rec.has(FLAG_DROP_QUERY),
            target: rec.target,
            account: Bytes::from(rec.account),
            ios: rec.ios,
            android: rec.android,
            created_at: rec.created_at,
            expires_at: link.expires_at,
            ttl_ms: rec.ttl_ms,
            visits: stats.total,
            last_visit: stats.last_visit,
            daily: stats.days.into_vec(),
        }))
    }
}
