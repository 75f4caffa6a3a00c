-- The HTTP push body parser (src/broker/listener/push_body.c) through queen._parse_push_body:
-- "error: <message>" or one line per item, queue|partition|txn|payload.

-- Payloads come back byte for byte as sent, whitespace included; absent
-- partition is Default, absent transactionId is NULL (the broker mints one).
SELECT queen._parse_push_body('{"items": [{"queue": "q1", "payload": {"a": 1}}]}');
SELECT queen._parse_push_body('{ "items" : [
  { "payload" :  { "b" : [1, 2 ,3] ,
      "c":{}  } , "queue":"q1", "partition": "p1", "transactionId": "t-1" },
  {"queue":"q2","payload":[ ],"partition":null,"transactionId":null}
 ] }');

-- Any JSON value is a payload, null included; scalars keep their spelling.
SELECT queen._parse_push_body('{"items": [
 {"queue": "q", "payload": null},
 {"queue": "q", "payload": "a\nb \u00e9"},
 {"queue": "q", "payload": -1.50e+3},
 {"queue": "q", "payload": true},
 {"queue": "q", "payload": false},
 {"queue": "q", "payload": [null, {"x": [{}]}]}]}');

-- Keys that look like the envelope's, nested inside a payload or an
-- ignored key, do not count; unknown keys anywhere are ignored.
SELECT queen._parse_push_body('{"meta": {"items": 5, "queue": "no"}, "items": [
 {"traceId": "abc", "queue": "q", "extra": {"queue": "nested", "payload": 1},
  "payload": {"items": [{"queue": "inner", "payload": 2}], "queue": "x", "transactionId": 7}}
], "after": [{"queue": "ignored"}]}');

-- Names are de-escaped, key names too.
SELECT queen._parse_push_body('{"items": [{"qu\u0065ue": "q\u00e9\"\/\\x", "partition": "\ud83d\ude00", "transactionId": "t\u0031", "payload": 0}]}');

-- An empty transactionId means "mint one", as in queen.push.
SELECT queen._parse_push_body('{"items": [{"queue": "q", "transactionId": "", "payload": 1}]}');

-- Empty items: no items, not an error.
SELECT queen._parse_push_body('{"items": []}') = '' AS no_items;
SELECT queen._parse_push_body(' {"other": 1, "items" : [ ] } ') = '' AS no_items;

-- Duplicate keys: the last one wins, as in jsonb (and so queen.push).
SELECT queen._parse_push_body('{"items": [{"queue": "first", "payload": 1}], "items": [{"queue": "second", "payload": 2}]}');
SELECT queen._parse_push_body('{"items": 5, "items": [{"queue": "q", "payload": 2}]}');
SELECT queen._parse_push_body('{"items": [{"queue": "q", "payload": 2}], "items": 5}');
SELECT queen._parse_push_body('{"items": [{"queue": 1, "queue": "q", "payload": 1, "payload": {"p": 2}, "partition": "a", "partition": null}]}');

-- Not JSON, or not the right shape.
SELECT queen._parse_push_body('');
SELECT queen._parse_push_body('   ');
SELECT queen._parse_push_body('{"items": [}');
SELECT queen._parse_push_body('{"items": []} x');
SELECT queen._parse_push_body('{"items": [{"queue": "q", "payload": 1}]');
SELECT queen._parse_push_body('{"items": [{"queue": "q", "payload": tru}]}');
SELECT queen._parse_push_body('[{"queue": "q", "payload": 1}]');
SELECT queen._parse_push_body('"items"');
SELECT queen._parse_push_body('null');
SELECT queen._parse_push_body('{}');
SELECT queen._parse_push_body('{"Items": []}');
SELECT queen._parse_push_body('{"items": {"queue": "q", "payload": 1}}');
SELECT queen._parse_push_body('{"items": null}');
SELECT queen._parse_push_body('{"items": "[]"}');
SELECT queen._parse_push_body('{"items": [{"queue": "q", "payload": 1}, [], {}]}');
SELECT queen._parse_push_body('{"items": [null]}');
SELECT queen._parse_push_body('{"items": [{"queue": "q", "payload": 1}, "x"]}');

-- Required keys and types; the message names the item.
SELECT queen._parse_push_body('{"items": [{"queue": "q", "payload": 1}, {"payload": 1}]}');
SELECT queen._parse_push_body('{"items": [{"queue": "q"}]}');
SELECT queen._parse_push_body('{"items": [{"queue": 5, "payload": 1}]}');
SELECT queen._parse_push_body('{"items": [{"queue": null, "payload": 1}]}');
SELECT queen._parse_push_body('{"items": [{"queue": {"name": "q"}, "payload": 1}]}');
SELECT queen._parse_push_body('{"items": [{"queue": "q", "partition": 1, "payload": 1}]}');
SELECT queen._parse_push_body('{"items": [{"queue": "q", "partition": ["p"], "payload": 1}]}');
SELECT queen._parse_push_body('{"items": [{"queue": "q", "transactionId": 42, "payload": 1}]}');
SELECT queen._parse_push_body('{"items": [{"queue": "q", "transactionId": false, "payload": 1}]}');

-- Names: not empty, no control characters, not too long.
SELECT queen._parse_push_body('{"items": [{"queue": "", "payload": 1}]}');
SELECT queen._parse_push_body('{"items": [{"queue": "a\u0001b", "payload": 1}]}');
SELECT queen._parse_push_body('{"items": [{"queue": "a\nb", "payload": 1}]}');
SELECT queen._parse_push_body('{"items": [{"queue": "a\u007fb", "payload": 1}]}');
SELECT queen._parse_push_body('{"items": [{"queue": "q", "partition": "", "payload": 1}]}');
SELECT queen._parse_push_body('{"items": [{"queue": "q", "partition": "p\u001f", "payload": 1}]}');
SELECT queen._parse_push_body('{"items": [{"queue": "q", "transactionId": "t\t", "payload": 1}]}');
SELECT queen._parse_push_body(format('{"items": [{"queue": "%s", "payload": 1}]}', repeat('q', 255))) = repeat('q', 255) || '|Default|NULL|1' AS longest_queue_ok;
SELECT queen._parse_push_body(format('{"items": [{"queue": "%s", "payload": 1}]}', repeat('q', 256)));
SELECT queen._parse_push_body(format('{"items": [{"queue": "q", "partition": "%s", "payload": 1}]}', repeat('é', 128)));
SELECT octet_length(queen._parse_push_body(format('{"items": [{"queue": "q", "transactionId": "%s", "payload": 1}]}', repeat('t', 65535)))) AS longest_txn_ok;
SELECT queen._parse_push_body(format('{"items": [{"queue": "q", "payload": 1}, {"queue": "q", "transactionId": "%s", "payload": 1}]}', repeat('t', 70000)));
-- An escape counts as the byte it stands for.
SELECT queen._parse_push_body(format('{"items": [{"queue": "%s", "payload": 1}]}', repeat('\u0041', 255))) = repeat('A', 255) || '|Default|NULL|1' AS escaped_length_ok;

-- Raw control characters in strings are not JSON at all.
SELECT queen._parse_push_body(E'{"items": [{"queue": "a\tb", "payload": 1}]}');
SELECT queen._parse_push_body(E'{"items": [{"queue": "q", "payload": "line\nbreak"}]}');
-- ...but whitespace between tokens is fine, and kept inside the payload.
SELECT queen._parse_push_body(E'{"items":[{"queue":"q","payload":[1,\r\n\t2]}]}') = E'q|Default|NULL|[1,\r\n\t2]' AS whitespace_kept;

-- \u0000 is refused anywhere, the payload and ignored keys included.
SELECT queen._parse_push_body('{"items": [{"queue": "q", "payload": "a\u0000b"}]}');
SELECT queen._parse_push_body('{"items": [{"queue": "q", "payload": {"k\u0000": 1}}]}');
SELECT queen._parse_push_body('{"x": "\u0000", "items": []}');
SELECT queen._parse_push_body('{"items": [{"queue": "q\u0000", "payload": 1}]}');

-- Broken escapes.
SELECT queen._parse_push_body('{"items": [{"queue": "q", "payload": "\ud83d"}]}');
SELECT queen._parse_push_body('{"items": [{"queue": "q", "payload": "\ude00"}]}');
SELECT queen._parse_push_body('{"items": [{"queue": "q", "payload": "\u12"}]}');
SELECT queen._parse_push_body('{"items": [{"queue": "q", "payload": "\x"}]}');

-- The first problem is reported; a syntax error anywhere outranks it.
SELECT queen._parse_push_body('{"items": [{"queue": "q", "payload": 1}, {"queue": 1}, {"payload": 1}]}');
SELECT queen._parse_push_body('{"items": [{"queue": 1, "payload": 1}], "x": }');
-- Within an item, types come first, then required keys, then names,
-- whatever the order of the keys.
SELECT queen._parse_push_body('{"items": [{"transactionId": 1, "queue": ""}]}');
SELECT queen._parse_push_body('{"items": [{"partition": "\n", "queue": ""}]}');
SELECT queen._parse_push_body('{"items": [{"partition": "\n", "queue": "", "payload": 1}]}');

-- A long quoted token is cut in the message.
SELECT queen._parse_push_body('{"items": [{"queue": "q", "payload": "' || repeat('é', 1000));

-- Nesting is bounded before the parser recurses (it would raise otherwise).
SELECT queen._parse_push_body('{"items": [{"queue": "q", "payload": ' || repeat('[', 509) || repeat(']', 509) || '}]}') = 'q|Default|NULL|' || repeat('[', 509) || repeat(']', 509) AS deepest_ok;
SELECT queen._parse_push_body('{"items": [{"queue": "q", "payload": ' || repeat('[', 510) || repeat(']', 510) || '}]}');
SELECT queen._parse_push_body(repeat('{"a":', 100000));
-- Brackets inside strings do not count.
SELECT queen._parse_push_body('{"items": [{"queue": "q", "payload": "' || repeat('[{', 1000) || '\"\\"}]}') = 'q|Default|NULL|"' || repeat('[{', 1000) || '\"\\"' AS brackets_in_strings_ok;

-- One pass over a realistic body: 1000 items with 1 kB payloads.
WITH body AS (
	SELECT '{"items": [' || string_agg(format('{"queue": "bulk", "partition": "p%s", "transactionId": "tx-%s", "payload": {"n": %s, "pad": "%s"}}', i % 7, i, i, repeat('x', 1000)), ', ') || ']}' AS b
	FROM generate_series(1, 1000) i
), lines AS (
	SELECT string_to_array(queen._parse_push_body(b), E'\n') AS l FROM body
)
SELECT cardinality(l) AS items,
	   l[1] = 'bulk|p1|tx-1|{"n": 1, "pad": "' || repeat('x', 1000) || '"}' AS first_ok,
	   l[1000] = 'bulk|p6|tx-1000|{"n": 1000, "pad": "' || repeat('x', 1000) || '"}' AS last_ok
FROM lines;
