//! `CATALOG.PUT`, `CATALOG.DEL`, `CATALOG.QUERY`, `CATALOG.ALIAS
//! SET|DEL|GET` and `CATALOG.SHED` (admin): records grouped under an owner,
//! found by owner or through an alias (`daemon/src/catalog/`).
//!
//! The owner is the key (its CRC16 slot). An alias lives in the slot of
//! (kind, alias) together, which is no one argument's CRC16: `CATALOG.ALIAS`
//! declares no key and relies on `MOVED`. A query by alias is two commands,
//! as in the binary protocol: `CATALOG.ALIAS GET`, then `CATALOG.QUERY` on
//! the owner (the daemon never waits on another shard for a command).

use super::{once, ArgError, Args, Parsed, Value, Writer};
use rush_protocol::cmd::{
    CatalogAliasDel, CatalogAliasSet, CatalogDelete, CatalogFilter, CatalogPut, CatalogQuery,
    CatalogResolve, CatalogShed, Record, RecordRef, ShedMode,
};
use rush_protocol::limits::MAX_ATTRIBUTES;
use rush_protocol::{Reply, RushError};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shape {
    /// PUT, DEL, ALIAS SET, ALIAS DEL: `:1` / `:0`.
    Flag,
    /// ALIAS GET: the owner, or null.
    Owner,
    Records,
    /// SHED: `+OK`.
    Ok,
}

pub(super) fn decode(name: &str, a: &mut Args) -> Option<Parsed<Shape>> {
    Some(match name {
        "catalog.put" => put(a),
        "catalog.del" => del(a),
        "catalog.query" => query(a),
        "catalog.alias" => alias(a),
        "catalog.shed" => shed(a),
        _ => return None,
    })
}

/// `CATALOG.PUT owner id [FROM unix_ms] [UNTIL unix_ms] [ATTRS name value
/// [name value ...]]`: ATTRS comes last and takes the rest, in pairs.
fn put(a: &mut Args) -> Parsed<Shape> {
    let owner = a.bytes()?;
    let mut record = Record::new(a.bytes()?);
    let (mut from, mut until) = (None, None);
    while !a.is_empty() {
        match a.keyword()?.as_slice() {
            b"FROM" => once(&mut from, a.u64()?)?,
            b"UNTIL" => once(&mut until, a.u64()?)?,
            b"ATTRS" => {
                let attribute = |a: &mut Args| Ok((a.bytes()?, a.bytes()?));
                record.attributes =
                    a.pairs(MAX_ATTRIBUTES, ("a record", "attributes"), attribute)?
            }
            _ => return Err(ArgError::Syntax),
        }
    }
    record.valid_from = from;
    record.valid_to = until;
    Ok((CatalogPut { owner, record }.into(), Shape::Flag))
}

/// `CATALOG.DEL owner id`.
fn del(a: &mut Args) -> Parsed<Shape> {
    let r = CatalogDelete {
        owner: a.bytes()?,
        record_id: a.bytes()?,
    };
    Ok((r.into(), Shape::Flag))
}

/// `CATALOG.QUERY owner [WHERE name value]... [AT unix_ms]`.
fn query(a: &mut Args) -> Parsed<Shape> {
    let owner = a.bytes()?;
    let mut filter = CatalogFilter::default();
    while !a.is_empty() {
        match a.keyword()?.as_slice() {
            b"WHERE" => {
                if filter.attributes.len() == MAX_ATTRIBUTES {
                    return Err(ArgError::at_most(
                        "a query",
                        MAX_ATTRIBUTES,
                        "WHERE conditions",
                    ));
                }
                let name = a.bytes()?;
                filter.attributes.push((name, a.bytes()?));
            }
            b"AT" => once(&mut filter.valid_at, a.u64()?)?,
            _ => return Err(ArgError::Syntax),
        }
    }
    Ok((CatalogQuery { owner, filter }.into(), Shape::Records))
}

/// `CATALOG.ALIAS SET kind alias owner`, `CATALOG.ALIAS DEL kind alias`,
/// `CATALOG.ALIAS GET kind alias`.
fn alias(a: &mut Args) -> Parsed<Shape> {
    let sub = a.bytes()?;
    let parsed = match sub.to_ascii_uppercase().as_slice() {
        b"SET" => {
            let r = CatalogAliasSet {
                kind: a.bytes()?,
                alias: a.bytes()?,
                owner: a.bytes()?,
            };
            (r.into(), Shape::Flag)
        }
        b"DEL" => {
            let r = CatalogAliasDel {
                kind: a.bytes()?,
                alias: a.bytes()?,
            };
            (r.into(), Shape::Flag)
        }
        b"GET" => {
            let r = CatalogResolve {
                kind: a.bytes()?,
                alias: a.bytes()?,
            };
            (r.into(), Shape::Owner)
        }
        _ => return Err(ArgError::unknown_subcommand(&sub, "SET, DEL or GET")),
    };
    a.end()?;
    Ok(parsed)
}

/// `CATALOG.SHED ON|OFF|AUTO` (admin).
fn shed(a: &mut Args) -> Parsed<Shape> {
    let mode = a.bytes()?.to_ascii_lowercase();
    let mode = std::str::from_utf8(&mode)
        .ok()
        .and_then(ShedMode::parse)
        .ok_or(ArgError::Syntax)?;
    Ok((CatalogShed { mode }.into(), Shape::Ok))
}

pub(super) fn render(w: &mut Writer, shape: &Shape, result: Result<Reply, RushError>) {
    match (shape, result) {
        (
            Shape::Flag,
            Ok(
                Reply::CatalogPut(f)
                | Reply::CatalogDelete(f)
                | Reply::CatalogAliasSet(f)
                | Reply::CatalogAliasDel(f),
            ),
        ) => w.flag(f),
        (Shape::Owner, Ok(Reply::CatalogResolve(owner))) => w.opt_bulk(owner.as_deref()),
        (Shape::Records, Ok(Reply::CatalogQuery(q))) => {
            w.array(q.records.len());
            for r in q.records.iter() {
                record(w, r);
            }
        }
        (Shape::Ok, Ok(Reply::CatalogShed(()))) => w.ok(),
        (_, Err(e)) => w.error(&e),
        (_, Ok(_)) => w.unexpected(),
    }
}

fn record(w: &mut Writer, r: RecordRef) {
    let fields = [
        ("id", Value::Bulk(r.id)),
        ("valid_from_ms", Value::OptU64(r.valid_from)),
        ("valid_until_ms", Value::OptU64(r.valid_to)),
    ];
    w.map(fields.len() + 1);
    w.fields(&fields);
    w.field("attributes");
    w.map(r.attribute_count());
    for (name, value) in r.attributes() {
        w.bulk(name);
        w.bulk(value);
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{refused, run};
    use super::super::ServiceShape;
    use super::*;
    use rush_protocol::Request;

    #[test]
    fn put_reads_validity_then_attributes() {
        match run("CATALOG.PUT m1 c1 FROM 10 until 20 ATTRS city sh tier gold") {
            Ok((Request::CatalogPut(p), ServiceShape::Catalog(Shape::Flag))) => {
                assert_eq!(p.owner, "m1");
                assert_eq!(
                    p.record,
                    Record::new("c1")
                        .attr("city", "sh")
                        .attr("tier", "gold")
                        .valid(Some(10), Some(20))
                );
            }
            other => panic!("{other:?}"),
        }
        match run("CATALOG.PUT m1 c2") {
            Ok((Request::CatalogPut(p), _)) => assert_eq!(p.record, Record::new("c2")),
            other => panic!("{other:?}"),
        }
        assert!(refused("CATALOG.PUT m c ATTRS a").starts_with("ERR wrong number of arguments"));
        assert!(refused("CATALOG.PUT m c ATTRS").starts_with("ERR wrong number of arguments"));
        assert_eq!(refused("CATALOG.PUT m c FROM 1 FROM 2"), "ERR syntax error");
        assert_eq!(refused("CATALOG.PUT m c city sh"), "ERR syntax error");
        assert_eq!(
            refused("CATALOG.PUT m c UNTIL soon"),
            "ERR value is not an integer or out of range"
        );
    }

    #[test]
    fn query_reads_conditions() {
        match run("CATALOG.QUERY m1 WHERE city sh where tier gold AT 15") {
            Ok((Request::CatalogQuery(q), ServiceShape::Catalog(Shape::Records))) => {
                assert_eq!(
                    q.filter,
                    CatalogFilter::default()
                        .attr("city", "sh")
                        .attr("tier", "gold")
                        .at(15)
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(refused("CATALOG.QUERY m WHERE city").starts_with("ERR wrong number of arguments"));
        assert_eq!(refused("CATALOG.QUERY m AT 1 AT 2"), "ERR syntax error");
    }

    #[test]
    fn alias_subcommands() {
        assert!(matches!(
            run("CATALOG.ALIAS SET name acme m1"),
            Ok((Request::CatalogAliasSet(s), ServiceShape::Catalog(Shape::Flag))) if s.owner == "m1"
        ));
        assert!(matches!(
            run("catalog.alias del name acme"),
            Ok((
                Request::CatalogAliasDel(_),
                ServiceShape::Catalog(Shape::Flag)
            ))
        ));
        assert!(matches!(
            run("CATALOG.ALIAS GET name acme"),
            Ok((
                Request::CatalogResolve(_),
                ServiceShape::Catalog(Shape::Owner)
            ))
        ));
        assert!(
            refused("CATALOG.ALIAS GET name acme m1").starts_with("ERR wrong number of arguments")
        );
        assert!(refused("CATALOG.ALIAS SET name acme").starts_with("ERR wrong number of arguments"));
        assert_eq!(
            refused("CATALOG.ALIAS MOVE a b"),
            "ERR unknown subcommand 'MOVE'. Try CATALOG.ALIAS SET, DEL or GET."
        );
    }

    #[test]
    fn shed_modes() {
        assert!(matches!(
            run("CATALOG.SHED auto"),
            Ok((
                Request::CatalogShed(CatalogShed {
                    mode: ShedMode::Auto
                }),
                _
            ))
        ));
        assert_eq!(refused("CATALOG.SHED sometimes"), "ERR syntax error");
    }
}
