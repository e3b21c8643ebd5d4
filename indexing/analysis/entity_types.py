"""The four entity types of the index (`filters.entityTypes`, graph nodes, `sources`): one spelling for all."""

PERSON, PLACE, ORGANIZATION, OTHER = "person", "place", "organization", "other"
