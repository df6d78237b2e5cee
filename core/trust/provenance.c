#include "provenance.h"

#include "fingerprint.h"
#include "scan.h"

/* "sha256:<hex>" of d, or null. */
static json_t *digest_json(const unsigned char *d)
{
	char text[FP_TEXT_SIZE];
	if (!d)
		return json_null();
	fp_format(d, text);
	return json_string(text);
}

static json_t *skill_json(const struct config *c, const struct catalog_entry *e)
{
	const struct scan_file *md = scan_find(e->scan, "SKILL.md");
	const char *src = e->source < c->nsources ? c->sources[e->source].path : NULL;
	return json_pack("{s:s, s:s?, s:s, s:b, s:o, s:o}", "name", e->skill->name, "source", src,
			 "trust", trust_name(e->trust), "valid", e->skill->valid,
			 "skill_md_sha256", digest_json(md ? md->sha : NULL), "digest",
			 digest_json(e->scan ? e->scan->digest : NULL));
}

json_t *provenance_of(const struct config *c, const struct catalog *cat,
		      const struct resolution *r)
{
	json_t *skills = json_array();
	for (size_t i = 0; skills && i < r->eff.neff; i++) {
		size_t ci = r->eff.eff[i];
		json_t *s = ci < cat->n ? skill_json(c, &cat->entries[ci]) : NULL;
		if (!s || json_array_append_new(skills, s) < 0) {
			json_decref(skills);
			skills = NULL;
		}
	}
	json_t *ceiling = r->grants.capped ? strlist_to_json(&r->grants.ceiling) : json_null();
	if (!skills || !ceiling) {
		json_decref(skills);
		json_decref(ceiling);
		return NULL;
	}
	return json_pack("{s:o, s:o}", "ceiling", ceiling, "skills", skills);
}
