//! LIMIT_POLICY_SET on the node: check the policy, store it durably, then
//! have every shard apply it.
//!
//! Stored in the meta column family as one record, `keys::meta::LIMIT_POLICIES`:
//! `u8 format (1) | PolicyListReply body` (every policy set at run time).
//! One record keeps the read-modify-write simple, and it is small: at most
//! `MAX_POLICIES` policies of at most `MAX_POLICY_RULES` rules.

use super::policy::resolve;
use crate::server::node_cmds::broadcast;
use crate::server::NodeShared;
use crate::storage::{keys, Storage};
use bytes::{BufMut, Bytes, BytesMut};
use rush_protocol::cmd::{LimitPolicySet, PolicyDef, PolicyListReply};
use rush_protocol::limits::MAX_POLICIES;
use rush_protocol::{ErrorCode, Reply, Request, RushError, Wire};
use std::collections::BTreeSet;
use std::time::Duration;

const FORMAT: u8 = 1;
/// A shard queue that is full answers BUSY; a policy set waits for room this
/// many times (10 ms apart) before giving up, so it isn't left applied on
/// some shards only.
const BUSY_RETRIES: u32 = 200;

/// Policy sets run one at a time, so the stored record and every shard's
/// table see them in the same order (two concurrent sets of one policy
/// could otherwise reach the shards' queues interleaved). Process-wide
/// rather than per node: sets are rare admin actions, and in-process test
/// nodes merely take turns.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The policies stored by earlier sets.
pub fn load_stored(storage: &Storage) -> Result<Vec<PolicyDef>, String> {
    let raw = storage
        .meta_get(keys::meta::LIMIT_POLICIES)
        .map_err(|e| format!("reading stored limit policies: {e}"))?;
    let Some(raw) = raw else {
        return Ok(Vec::new());
    };
    match raw.split_first() {
        Some((&FORMAT, body)) => PolicyListReply::decode_body(Bytes::copy_from_slice(body))
            .map(|l| l.policies)
            .map_err(|e| format!("stored limit policies are corrupt: {e}")),
        _ => Err("stored limit policies have an unknown format".into()),
    }
}

fn encode_stored(policies: Vec<PolicyDef>) -> Vec<u8> {
    let mut b = BytesMut::new();
    b.put_u8(FORMAT);
    PolicyListReply { policies }.encode(&mut b);
    b.to_vec()
}

/// Check, store, broadcast. The answer is shard 0's (every shard answers
/// the same).
pub async fn policy_set(node: &NodeShared, set: LimitPolicySet) -> Result<Reply, RushError> {
    let _turn = ONE_AT_A_TIME.lock().await;
    let def = resolve(set.policy, &node.config.limits).map_err(RushError::bad_request)?;

    let (storage, config, stored_def) = (node.storage.clone(), node.config.clone(), def.clone());
    tokio::task::spawn_blocking(move || {
        let mut stored = load_stored(&storage).map_err(RushError::internal)?;
        stored.retain(|p| p.name != stored_def.name);
        let names: BTreeSet<&str> = config
            .limits
            .policies
            .keys()
            .map(String::as_str)
            .chain(stored.iter().map(|p| p.name.as_str()))
            .chain([stored_def.name.as_str()])
            .collect();
        if names.len() > MAX_POLICIES {
            return Err(RushError::bad_request(format!(
                "a node holds at most {MAX_POLICIES} policies"
            )));
        }
        stored.push(stored_def);
        stored.sort_by(|a, b| a.name.cmp(&b.name));
        storage
            .meta_put(keys::meta::LIMIT_POLICIES, &encode_stored(stored))
            .map_err(|e| RushError::unavailable(format!("storing the policy: {e}")))
    })
    .await
    .map_err(|e| RushError::internal(format!("policy store task: {e}")))??;

    let name = def.name.clone();
    let request = Request::LimitPolicySet(LimitPolicySet { policy: def });
    let mut tries = 0;
    let replies = loop {
        match broadcast(node, request.clone()).await {
            Ok(replies) => break replies,
            Err(e) if e.code == ErrorCode::Busy && tries < BUSY_RETRIES => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(mut e) => {
                e.message = format!(
                    "policy stored (it applies from the next start) but not applied on every shard: {}; retry",
                    e.message
                );
                return Err(e);
            }
        }
    };
    tracing::info!(policy = %name, "limit policy set");
    replies
        .into_iter()
        .next()
        .ok_or_else(|| RushError::internal("no shards"))
}

/// Every shard compiled the same stored policy: the first answer speaks for
/// all of them.
pub fn combine(req: &Request, replies: Vec<Reply>) -> Result<Reply, RushError> {
    match req {
        Request::LimitPolicySet(_) => replies
            .into_iter()
            .next()
            .ok_or_else(|| RushError::internal("no shards")),
        other => crate::services::no_broadcast(other, replies),
    }
}
